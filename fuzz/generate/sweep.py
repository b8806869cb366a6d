"""The op family's systematic sweep and its coverage report.

The sweep is thunder's OpInfo test run through thunderfx inside a checkpoint: every drawable
op call (`fuzz.generate.op_catalog`: each argument variant in each call form) alone in one checkpoint.
Random composition then finds what only combinations show; the sweep makes sure that no op is
left to chance. Cases are ordered so that every op has run once before any op runs twice.
"""

from __future__ import annotations

from collections.abc import Sequence

from fuzz.generate import axes
from fuzz.generate.op_catalog import OpCall, catalog
from fuzz.generate.spec import CheckpointSpec, LayerSpec, NetSpec

CI_SWEEP_CASES = 16  # the ci profile's derandomized slice, spread over the whole catalog
_SWEEP_FEATURES = 4
_SWEEP_BATCH = 2


def _case(call: OpCall, params: dict, dtype: str, device: str, seed: int) -> NetSpec:
    return NetSpec(
        features=_SWEEP_FEATURES,
        layers=[LayerSpec(call.kind, params)],
        checkpoints=[CheckpointSpec(0, 1)],
        batch=_SWEEP_BATCH,
        dtype=dtype,
        device=device,
        seed=seed,
    )


def sweep_specs(
    device: str, dtypes: Sequence[str], kinds: Sequence[str] = ("op", "op_module"), ops: Sequence[str] | None = None
) -> list[NetSpec]:
    """One spec per drawable call of ``kinds`` and ``ops`` (default: all): the call alone in one checkpoint; then one
    per argument axis value class of each op (`fuzz.generate.axes`: its first call that has it, varied so).

    The k-th call of each op comes after the (k-1)-th call of every op, and runs in the k-th of
    the call's dtypes among ``dtypes`` (float32 first), so the first pass covers every op; the varied calls come
    after every sample call, in the first of ``dtypes`` the call runs in (their mutations are checked eagerly in
    float32 and float64 only), the k-th class of each op after the (k-1)-th of every op.
    """
    ranked: list[tuple[int, int, NetSpec]] = []
    varied: list[tuple[int, int, NetSpec]] = []
    seen: dict[str, int] = {}
    classes: dict[str, set[tuple[str, str]]] = {}
    for call in catalog().calls:
        usable = [dtype for dtype in dtypes if dtype in call.dtypes]
        if not usable or call.kind not in kinds or (ops is not None and call.op not in ops):
            continue
        k = seen[call.op] = seen.get(call.op, -1) + 1
        ranked.append((k, len(seen), _case(call, call.params, usable[k % len(usable)], device, k)))
        checked = [dtype for dtype in usable if dtype in ("float32", "float64")]
        for mutation in call.mutations if checked else ():
            value_class = (mutation["axis"], mutation["class"])
            if value_class not in classes.setdefault(call.op, set()):
                classes[call.op].add(value_class)
                spec = _case(call, axes.mutated(call.params, mutation), checked[0], device, len(classes[call.op]))
                varied.append((len(classes[call.op]), len(seen), spec))
    return [spec for _, _, spec in sorted(ranked, key=lambda e: e[:2]) + sorted(varied, key=lambda e: e[:2])]
