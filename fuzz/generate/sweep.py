"""The op family's systematic sweep and its coverage report.

The sweep is thunder's OpInfo test run through thunderfx inside a checkpoint: every drawable
op call (`fuzz.generate.op_catalog`: each argument variant in each call form) alone in one checkpoint.
Random composition then finds what only combinations show; the sweep makes sure that no op is
left to chance. Cases are ordered so that every op has run once before any op runs twice.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from fuzz.generate import axes
from fuzz.generate.op_catalog import MUTATION_DTYPES, OpCall, catalog
from fuzz.generate.ops import tensor_literals
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


def _degenerate(call: OpCall) -> bool:
    """Whether a sample call has a float tensor of fewer than two elements: a poor call to vary (a one-element layer
    norm or softmax has no gradient to get wrong; a 0-dim partner crashes thunder, known issue
    binary-op-zero-dim-tensor-crash), taken for a value class only where no other call of the op has it."""
    return any(math.prod(t["tensor"]) < 2 for t in tensor_literals([*call.args, *call.kwargs.values()]))


def sweep_specs(
    device: str, dtypes: Sequence[str], kinds: Sequence[str] = ("op", "op_module"), ops: Sequence[str] | None = None
) -> list[NetSpec]:
    """One spec per drawable call of ``kinds`` and ``ops`` (default: all), the call alone in one checkpoint, and one
    per argument axis value class of each op (`fuzz.generate.axes`: its first call that has it, varied so; a
    `_degenerate` one last).

    Per op, its first sample call comes first, then the first class of each of its axes, then its other sample calls,
    then its other classes; the k-th case of each op comes after the (k-1)-th case of every op, so the first passes
    cover every op and every (op, axis) pair. The k-th sample call of an op runs in the k-th of its dtypes among
    ``dtypes`` (float32 first); a varied call in the first of ``dtypes`` it runs in among float32 and float64 (where
    the catalog checked its mutations).
    """
    samples: dict[str, list[NetSpec]] = {}
    classes: dict[str, dict[tuple[str, str], NetSpec]] = {}
    drawable = [
        call
        for call in catalog().calls
        if any(dtype in call.dtypes for dtype in dtypes) and call.kind in kinds and (ops is None or call.op in ops)
    ]
    for call in drawable:
        usable = [dtype for dtype in dtypes if dtype in call.dtypes]
        k = len(samples.setdefault(call.op, []))
        samples[call.op].append(_case(call, call.params, usable[k % len(usable)], device, k))
    for call in sorted(drawable, key=_degenerate):
        checked = [dtype for dtype in dtypes if dtype in call.dtypes and dtype in MUTATION_DTYPES]
        for mutation in call.mutations if checked else ():
            if (value_class := (mutation["axis"], mutation["class"])) not in classes.setdefault(call.op, {}):
                varied = axes.mutated(call.params, mutation)
                classes[call.op][value_class] = _case(call, varied, checked[0], device, len(classes[call.op]) + 1)
    ranked: list[tuple[int, int, NetSpec]] = []
    for number, (op, cases) in enumerate(samples.items()):
        by_class = classes.get(op, {})
        first_of_axis: dict[str, tuple[str, str]] = {}
        for key in by_class:
            first_of_axis.setdefault(key[0], key)
        firsts = [by_class[first_of_axis[axis]] for axis in axes.AXES if axis in first_of_axis]
        others = [spec for key, spec in by_class.items() if key not in first_of_axis.values()]
        ranked += [(k, number, spec) for k, spec in enumerate([cases[0], *firsts, *cases[1:], *others])]
    return [spec for _, _, spec in sorted(ranked, key=lambda entry: entry[:2])]
