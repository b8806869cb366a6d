"""The op family's systematic sweep and its coverage report.

The sweep is thunder's OpInfo test run through thunderfx inside a checkpoint: every drawable
op call (`fuzz.generate.op_catalog`: each argument variant in each call form) alone in one checkpoint.
Random composition then finds what only combinations show; the sweep makes sure that no op is
left to chance. Cases are ordered so that every op has run once before any op runs twice.
"""

from __future__ import annotations

from collections.abc import Sequence

from fuzz.generate.op_catalog import catalog
from fuzz.generate.spec import CheckpointSpec, LayerSpec, NetSpec

CI_SWEEP_CASES = 16  # the ci profile's derandomized slice, spread over the whole catalog
_SWEEP_FEATURES = 4
_SWEEP_BATCH = 2


def sweep_specs(
    device: str, dtypes: Sequence[str], kinds: Sequence[str] = ("op", "op_module"), ops: Sequence[str] | None = None
) -> list[NetSpec]:
    """One spec per drawable call of ``kinds`` and ``ops`` (default: all): the call alone in one checkpoint.

    The k-th call of each op comes after the (k-1)-th call of every op, and runs in the k-th of
    the call's dtypes among ``dtypes`` (float32 first), so the first pass covers every op.
    """
    ranked: list[tuple[int, int, NetSpec]] = []
    seen: dict[str, int] = {}
    for call in catalog().calls:
        usable = [dtype for dtype in dtypes if dtype in call.dtypes]
        if not usable or call.kind not in kinds or (ops is not None and call.op not in ops):
            continue
        k = seen[call.op] = seen.get(call.op, -1) + 1
        spec = NetSpec(
            features=_SWEEP_FEATURES,
            layers=[LayerSpec(call.kind, call.params)],
            checkpoints=[CheckpointSpec(0, 1)],
            batch=_SWEEP_BATCH,
            dtype=usable[k % len(usable)],
            device=device,
            seed=k,
        )
        ranked.append((k, len(seen), spec))
    return [spec for _, _, spec in sorted(ranked, key=lambda entry: entry[:2])]
