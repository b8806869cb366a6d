"""Greedy reduction of a failing spec after Hypothesis's shrinking, before its repro is written.

Hypothesis's shrinker works on the choice sequence and can stop in a local minimum (a leading
``linear(1 -> 1)`` that deleting its span alone does not remove, for one). This pass works on
the spec itself: it tries no training steps (or fewer, one batch size, SGD), replacing each op layer by its
plumbing twin (the op replaced by identity, `fuzz.generate.ops.plumbing_params`), deleting each layer and each
checkpoint, replacing a layer that has parameters (an MLP with a tanh inside, the plumbing twin) by a simpler
parameter-free kind and an in-place update by its out-of-place twin, and going back to the plain float input,
float32, the smallest batch, width and image and an op's smallest tensor arguments, keeping a candidate when it
is valid and still fails in the same class, until nothing more goes.

The blame: every pass tries the plumbing twins first and the stand-ins last (each layer's op, or its kind, replaced
by another op of the same shape and arity, `fuzz.generate.ops.stand_in_source`), an op's twin and stand-in past the
check and time budget, so an op layer in a reduced spec is one whose twin and stand-in both passed in that very
network: the op, not its plumbing nor its place in the network, is what fails. A failure that stays with a stand-in
for every layer lives in no op (a region no longer recomputed, a converter-wide fault): its network is stand-ins
only (`in_no_op`), and every such failure of one class is one cluster (`fuzz.report.clusters`), whichever ops it
was found with. The first pass then tries each layer alone; every pass tries an op layer's sample call (its varied
argument put back, `fuzz.generate.axes`) before any deletion, so a failure keeps a varied argument only where the
sample passes.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any

from fuzz.generate import axes, ops, program
from fuzz.generate.layers import LAYER_KINDS
from fuzz.generate.spec import OPTIMIZERS, LayerSpec, NetSpec, SpecError, validate


def _rewired(spec: NetSpec, index: int) -> tuple[list[LayerSpec], list[int] | None]:
    """A program's layers and outputs without layer ``index``: what read its value reads its first input instead."""
    removed, first = index + 1, program.reads_of(spec.layers[index], index)[0]

    def moved(value: int) -> int:
        return first if value == removed else value - (value > removed)

    layers = [
        layer if i < index or layer.reads is None else replace(layer, reads=[moved(read) for read in layer.reads])
        for i, layer in enumerate(spec.layers)
        if i != index
    ]
    outputs = None if spec.outputs is None else list(dict.fromkeys(moved(value) for value in spec.outputs))
    return layers, outputs


def _without_layer(spec: NetSpec, index: int) -> NetSpec:
    layers, outputs = (
        _rewired(spec, index) if spec.is_program else (spec.layers[:index] + spec.layers[index + 1 :], None)
    )
    checkpoints = []
    for ckpt in spec.checkpoints:
        start = ckpt.start - (ckpt.start > index)
        stop = ckpt.stop - (ckpt.stop > index)
        if stop > start:
            checkpoints.append(replace(ckpt, start=start, stop=stop, segments=min(ckpt.segments, stop - start)))
    return replace(spec, layers=layers, checkpoints=checkpoints, outputs=outputs)


def without_layers(spec: NetSpec, indexes: list[int]) -> NetSpec:
    """``spec`` without the layers at ``indexes``, checkpoint spans shrunk (and dropped when emptied) to match."""
    for index in sorted(indexes, reverse=True):
        spec = _without_layer(spec, index)
    return spec


PLUMBING = "op_plumbing"


def with_plumbing(spec: NetSpec, indexes: list[int] | None = None) -> NetSpec:
    """``spec`` with the op layers at ``indexes`` (default: all of them) replaced by their plumbing twins."""
    layers = [
        replace(layer, kind=PLUMBING, params=ops.plumbing_params(layer.params))
        if "op" in layer.params and (indexes is None or index in indexes)
        else layer
        for index, layer in enumerate(spec.layers)
    ]
    return replace(spec, layers=layers)


def without_randomness(spec: NetSpec) -> NetSpec | None:
    """``spec`` with nothing random: its random layers deleted, a model's dropout 0; None when nothing valid is left."""
    if spec.model is not None:
        twin = replace(spec, model=replace(spec.model, dropout=0.0))
    else:
        twin = without_layers(spec, [i for i, layer in enumerate(spec.layers) if LAYER_KINDS[layer.kind].random])
    return twin if (twin.layers or twin.model is not None) and valid(twin) else None


def _blame_candidates(spec: NetSpec) -> Iterator[NetSpec]:
    for index, layer in enumerate(spec.layers):
        if "op" in layer.params:
            yield with_plumbing(spec, [index])


STAND_IN = "stand_in"
# Seeds after a network's own that each deletion is tried under, after the deletions under its own (`_reseeded`).
RESEEDS = 2


def _stand_in(spec: NetSpec, index: int, widths: list[int]) -> LayerSpec | None:
    """Layer ``index`` of ``spec`` with a stand-in in its place (`fuzz.generate.ops.STAND_INS`, the first that is
    not its own op or kind), or None where it has none: a layer of another shape (a features layer that changes the
    width, any image layer), a node reading two values, one of the random or in-place kinds, or no op already (a
    plumbing twin, a stand-in). A layer with parameters that keeps its input's width (a Linear(1 -> 1), a norm) has
    one too: the stand-in then has none, which a failure in no op does not need. ``widths``: `NetSpec.widths`."""
    layer, kind = spec.layers[index], LAYER_KINDS[spec.layers[index].kind]
    keeps_shape = kind.layout == "any" or (
        kind.layout == "features" and not spec.is_program and widths[index] == widths[index + 1]
    )
    if not keeps_shape or (layer.reads is not None and len(layer.reads) > 1):
        return None
    if "op" in layer.params:
        args, own = ops.plumbing_params(layer.params)["args"], layer.params["op"]
    elif not kind.drawn or kind.flow or kind.random or kind.inplace:
        return None
    else:
        args, own = [], layer.kind
    function = next(name for name in ops.STAND_INS if name != own)
    return replace(layer, kind=STAND_IN, params={"args": args, "function": function}, frozen=False)


def _stand_in_candidates(spec: NetSpec) -> Iterator[tuple[LayerSpec, NetSpec]]:
    """Each layer that has a stand-in, and ``spec`` with the stand-in in its place."""
    widths = spec.widths()
    for index, layer in enumerate(spec.layers):
        if (stand_in := _stand_in(spec, index, widths)) is not None:
            yield layer, _with_layer(spec, index, stand_in)


def in_no_op(spec: NetSpec) -> bool:
    """Whether ``spec``'s failure was shown to live in no op: every layer of its reduced network is a stand-in."""
    return bool(spec.layers) and all(layer.kind == STAND_IN for layer in spec.layers)


def _simpler_training(spec: NetSpec) -> Iterator[NetSpec]:
    """No training steps, one step less (the last, or the first after step 0: a batch size change moves one step
    earlier), one batch size at every step, the smallest later batch size, SGD."""
    training = spec.training
    if training is None:
        return
    yield replace(spec, training=None)
    batches = training.batches
    if training.steps > 1:
        yield replace(spec, training=replace(training, steps=training.steps - 1, batches=batches and batches[:-1]))
        if batches is not None and training.steps > 2:
            yield replace(spec, training=replace(training, steps=training.steps - 1, batches=batches[:1] + batches[2:]))
    if batches is not None:
        yield replace(spec, training=replace(training, batches=None))
        smallest = 1 if batches[0] != 1 else 2  # the smallest batch size that still changes
        yield replace(spec, training=replace(training, batches=[b if b == batches[0] else smallest for b in batches]))
    if training.optimizer != OPTIMIZERS[0]:
        yield replace(spec, training=replace(training, optimizer=OPTIMIZERS[0]))


def _like_in_flow(kind: str, simpler: str) -> bool:
    """Whether ``simpler`` may stand for ``kind`` in a program's data flow: any kind for a stack layer; for a
    data-flow node (a view, an update, an input) only one that reads as many values and updates alike (measured on one
    catalog-update network: its update's 40-odd stack kinds took 45 of the reduction's 55 checks, and none failed;
    its plain update, `Flow.plain`, is tried apart)."""
    flow, other = LAYER_KINDS[kind].flow, LAYER_KINDS[simpler].flow
    return flow is None or (other is not None and (other.reads, other.updates) == (flow.reads, flow.updates))


def _with_layer(spec: NetSpec, index: int, layer: LayerSpec) -> NetSpec:
    return replace(spec, layers=[*spec.layers[:index], layer, *spec.layers[index + 1 :]])


def _reseeded(spec: NetSpec) -> Iterator[NetSpec]:
    """Each layer deleted, under the next seeds (`RESEEDS`): where a failure shows only for some values (an `abs_`
    updates a negative value only), a deletion redraws every weight and input after it, and the layers a shrunk
    network kept may be there only to make the value the failure needs (measured: 1x1 Linear layers before a clone's
    `abs_`, the last two of which went only under other seeds)."""
    for index in range(len(spec.layers)):
        smaller = _deleted(spec, index)
        yield from (replace(smaller, seed=smaller.seed + step) for step in range(1, RESEEDS + 1))


def _deleted(spec: NetSpec, index: int) -> NetSpec:
    """``spec`` without layer ``index``, what read it reading what it read."""
    smaller = _without_layer(spec, index)
    # What read the layer may no longer fit what it reads now (an input's view of columns 2:4 of a deleted input,
    # then a view of x of width 1): fitted again.
    return smaller if valid(smaller) else _refitted(smaller)


def _candidates(spec: NetSpec) -> Iterator[NetSpec]:
    yield from _simpler_training(spec)
    # Nothing random: a failure its deterministic twin shows is that twin's (`fuzz.judge.verdict`), and its repro
    # then compares with eager, not with thunderfx without checkpoints (a model spec's only reduction but sizes).
    if spec.random and (twin := without_randomness(spec)) is not None:
        yield twin
    # Toward thunder's sample: each op layer's varied argument put back (fuzz.generate.axes).
    for index, layer in enumerate(spec.layers):
        if "mutation" in layer.params:
            yield _with_layer(spec, index, replace(layer, params=axes.reverted(layer.params)))
    # A grad-mode region dropped before any layer inside it (its layers then run under the network's own mode).
    blocks = program.grad_blocks(spec.layers, spec.checkpoints)
    for block in dict.fromkeys(block for block in blocks if block is not None):
        layers = [
            replace(layer, grad_mode=None) if blocks[i] == block else layer for i, layer in enumerate(spec.layers)
        ]
        yield replace(spec, layers=layers)
    for index in range(len(spec.layers)):
        yield _deleted(spec, index)
    for index in range(len(spec.checkpoints)):
        yield replace(spec, checkpoints=spec.checkpoints[:index] + spec.checkpoints[index + 1 :])
    # (Before simpler kinds: an update node has some 40 of those, and a reduction's 50 checks ran out on them.)
    yield from _reseeded(spec)
    order = list(LAYER_KINDS)  # simplest first
    for index, layer in enumerate(spec.layers):
        # An op layer (fuzz.generate.ops) stays that op: it is what the failure is about.
        if LAYER_KINDS[layer.kind].params and "op" not in layer.params and layer.kind != STAND_IN:
            for name in order[: order.index(layer.kind)]:
                if not LAYER_KINDS[name].params and _like_in_flow(layer.kind, name):
                    simpler = replace(layer, kind=name, params={}, frozen=False)
                    yield _with_layer(spec, index, simpler)
    # The plain input: float features that require grad, no embedding.
    if spec.vocab is not None or not spec.input_requires_grad:
        yield replace(spec, vocab=None, input_requires_grad=True)
    if spec.dtype != "float32":
        yield replace(spec, dtype="float32")
    # The smallest sizes (the shrinker can stop at a width of 2 whose layer params its width-1 twin redraws),
    # each layer's params fitted again to what then enters it.
    for field, smallest in (("batch", 1), ("features", 1), ("spatial", spec.spatial and [1] * len(spec.spatial))):
        if getattr(spec, field) != smallest:
            yield _refitted(_with_first_batch(replace(spec, **{field: smallest})))
    yield from _smaller_op_tensors(spec)
    # No in-place update: each replaced by its out-of-place twin (its params kept), then free to lose the clone it
    # updated (`fuzz.generate.program_specs` draws an update of a fresh clone where nothing else may be updated).
    for index, layer in enumerate(spec.layers):
        if (flow := LAYER_KINDS[layer.kind].flow) is not None and flow.updates and flow.twin is not None:
            yield _with_layer(spec, index, replace(layer, kind=flow.twin))
    # Or by a view of what it updates: the aliases it makes stay, the update goes (`v2 = v1.add_(v1)` taken with v1
    # into a checkpoint as two aliased inputs: measured, Hypothesis's shrinking kept the update and the clone it
    # needs, four layers where an alias of x makes three).
    for index, layer in enumerate(spec.layers):
        if (flow := LAYER_KINDS[layer.kind].flow) is not None and flow.updates:
            yield _with_layer(spec, index, LayerSpec("alias", reads=layer.reads[:1], grad_mode=layer.grad_mode))
    # Toward today's three updates, last (one may send its checkpoint to the fallback: inductor's first set-up in a
    # process takes seconds): an update by the op catalog's call replaced by the update it stands for.
    for index, layer in enumerate(spec.layers):
        if (flow := LAYER_KINDS[layer.kind].flow) is not None and flow.plain is not None:
            yield _with_layer(spec, index, replace(layer, kind=flow.plain, params={}))


def _with_size(value: Any, size: int, new: int) -> Any:
    """``value`` (an op layer's params, nested) with every dimension of ``size`` of its tensor arguments ``new``."""
    if isinstance(value, dict):
        if "tensor" in value:
            return {**value, "tensor": [new if d == size else d for d in value["tensor"]]}
        return {key: _with_size(item, size, new) for key, item in value.items()}
    if isinstance(value, list):
        return [_with_size(item, size, new) for item in value]
    return value


def _has_values(value: Any) -> bool:
    """Whether an op layer's params (nested) hold a literal-valued tensor (``{"values": ...}``: indices, masks)."""
    if isinstance(value, dict):
        return "values" in value or any(_has_values(item) for item in value.values())
    return isinstance(value, list) and any(_has_values(item) for item in value)


def _smaller_op_tensors(spec: NetSpec) -> Iterator[NetSpec]:
    """Each op layer's tensor arguments smaller, toward the smallest shape that still fails: every dimension of one
    size made 1 (then 2), the largest size first, in all the call's tensor arguments at once (and in its recorded
    mutation), so that dimensions the op needs equal (broadcast, a matmul's inner one) stay equal. A call the smaller
    shapes break fails in eager, which no candidate survives."""
    for index, layer in enumerate(spec.layers):
        # (Not a call with literal index tensors: smaller shapes would put their values out of range, which on CUDA is
        # a device-side assert that poisons the process.)
        if "op" not in layer.params or _has_values(layer.params):
            continue
        literals = ops.tensor_literals([*layer.params["args"], *layer.params["kwargs"].values()])
        for size in sorted({d for t in literals for d in t["tensor"] if d > 1}, reverse=True):
            for new in (1, 2) if size > 2 else (1,):
                params = _with_size(layer.params, size, new)
                smaller = ops.tensor_literals([*params["args"], *params["kwargs"].values()])
                # An expanded argument is made with a size-1 dimension where it has its first size above 1.
                if all(max(t["tensor"], default=1) > 1 for t in smaller if t.get("layout") == "expanded"):
                    yield _with_layer(spec, index, replace(layer, params=params))


def _with_first_batch(spec: NetSpec) -> NetSpec:
    """``spec`` with its training's first batch size its own ``batch`` (as validation asks)."""
    if spec.training is None or spec.training.batches is None:
        return spec
    return replace(spec, training=replace(spec.training, batches=[spec.batch, *spec.training.batches[1:]]))


def _alone(spec: NetSpec) -> Iterator[NetSpec]:
    """Each layer alone (with its checkpoint): a jump that deleting one layer at a time reaches only where every step
    still fails (a softmax fault's 7-layer network stayed unreduced in 60 s); tried on the first pass only, as it
    costs a check per layer where the failure needs two."""
    if len(spec.layers) > 2:
        for index in range(len(spec.layers)):
            yield without_layers(spec, [i for i in range(len(spec.layers)) if i != index])


def _refitted(spec: NetSpec) -> NetSpec:
    """``spec`` with each layer's params fitted (`fuzz.generate.kind.LayerKind.fit`) to what enters it."""
    shapes, layers = [spec.incoming()[0]], []
    for index, layer in enumerate(spec.layers):
        kind, incoming = LAYER_KINDS[layer.kind], shapes[program.reads_of(layer, index)[0]]
        layer = replace(layer, params=dict(kind.fit(layer.params, incoming)))
        layers.append(layer)
        shapes.append(kind.output(layer.params, incoming))
    return replace(spec, layers=layers)


def valid(spec: NetSpec) -> bool:
    """Whether ``spec`` passes `validate`."""
    try:
        validate(spec)
    except SpecError:
        return False
    return True


def reduce_spec(
    spec: NetSpec, still_fails: Callable[[NetSpec], bool], max_checks: int = 50, max_seconds: float | None = None
) -> NetSpec:
    """The smallest spec reachable from ``spec`` by deleting layers and checkpoints while ``still_fails``, within
    ``max_checks`` calls of it and (when given) ``max_seconds``; a spec is checked once however often it comes up,
    and never gone back to."""
    deadline = None if max_seconds is None else time.monotonic() + max_seconds
    verdicts: dict[str, bool] = {}
    been = {spec.to_json()}

    def fails(candidate: NetSpec, key: str) -> bool:
        if key not in verdicts:
            verdicts[key] = still_fails(candidate)
        return verdicts[key]

    progress, first_pass = True, True
    while progress:
        progress, out_of_checks = False, len(verdicts) >= max_checks  # (counted per pass)
        twins, stand_ins = list(_blame_candidates(spec)), list(_stand_in_candidates(spec))
        # What `fuzz.report.failures.blames` names is checked past the budget: each op's twin and stand-in.
        blame = [*twins, *(twin for layer, twin in stand_ins if "op" in layer.params)]
        jumps = list(_alone(spec)) if first_pass else []
        first_pass = False
        # (The stand-ins last: each is tried where nothing smaller still fails.)
        for candidate in [*twins, *jumps, *_candidates(spec), *(twin for _, twin in stand_ins)]:
            out_of_budget = out_of_checks or (deadline is not None and time.monotonic() > deadline)
            if out_of_budget and not any(candidate is twin for twin in blame):
                continue
            if (key := candidate.to_json()) in been:
                continue
            if (candidate.layers or candidate.model is not None) and valid(candidate) and fails(candidate, key):
                spec, progress = candidate, True
                been.add(key)
                break
    return spec
