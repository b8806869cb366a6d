"""Programs: layers that read any earlier values, with checkpoints as regions of the data flow.

A spec is a program when a layer says which values it reads (`LayerSpec.reads`): value 0 is the network's input,
value ``k`` the output of layer ``k - 1``. Values fan out to any number of readers; the data-flow kinds
(`fuzz.generate.flow`) copy, view, combine and update them in place. A checkpoint covers layers ``start .. stop-1``
(a region): its function takes every earlier value they read (views of one another included) and returns every value
of its own that is read after it (all of them with ``multi_output``, some then unused). The network returns its
output values (default: the last) flattened and concatenated. Programs are matrices ``(batch, features)``.

Eager rejects some in-place updates (docs/oracle.md); `update_problems` says which, and `repaired` turns such an
update into its out-of-place twin, so the strategies' programs are valid by construction.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from fuzz.generate.kind import Incoming, is_int
from fuzz.generate.layers import LAYER_KINDS


@dataclass(frozen=True)
class Value:
    """A value of a program: its shape (``batch`` rows of ``width``), the value owning its storage (itself, unless
    it is a view or an updated value), the checkpoint it is made in (None outside checkpoints), whether it is
    contiguous (False where it may not be), whether its elements may share memory (a view of an expand), whether it
    requires grad, the grad-mode regions (`grad_blocks`; None: under the network's own mode) it and each view it
    is of were made in, and whether it is a network input's own tensor (value 0, a ``state_input``: a leaf)."""

    shape: Incoming
    base: int
    region: int | None
    contiguous: bool = True
    overlapping: bool = False
    requires_grad: bool = True
    view_blocks: frozenset[int | None] = frozenset({None})
    leaf: bool = False


def reads_of(layer: Any, index: int) -> list[int]:
    """The values layer ``index`` reads: its ``reads``, or its predecessor's output in a stack."""
    return list(layer.reads) if layer.reads is not None else [index]


def read_after(layers: Sequence[Any], value: int, index: int) -> bool:
    """Whether a layer after layer ``index`` reads ``value``."""
    return any(value in reads_of(layer, later) for later, layer in enumerate(layers) if later > index)


def unobserved_values(layers: Sequence[Any], checkpoints: Sequence[Any], incoming: Incoming) -> list[int]:
    """The values before the last that nothing reads after they are made or after the last in-place update of their
    memory: what a program returns so that each of its layers and updates is judged. (An update's own value is
    right where a functionalization loses the update: the tensor it updated, read later, is what shows it.)"""
    made, after_update = values(layers, checkpoints, incoming), {}
    for index, layer in enumerate(layers):
        if (flow := LAYER_KINDS[layer.kind].flow) is not None and flow.updates:
            after_update[made[reads_of(layer, index)[0]].base] = index + 1
    return [
        value
        for value in range(1, len(layers))
        if not any(
            value in reads_of(layers[later], later)
            for later in range(after_update.get(made[value].base, 0), len(layers))
        )
    ]


def region_of(checkpoints: Sequence[Any], index: int) -> int | None:
    """The number of the checkpoint that holds layer ``index``, or None."""
    return next((number for number, c in enumerate(checkpoints) if c.start <= index < c.stop), None)


def grad_blocks(layers: Sequence[Any], checkpoints: Sequence[Any]) -> list[int | None]:
    """Each layer's grad-mode region: the first layer of the run of consecutive layers under its ``grad_mode`` in
    one checkpoint (or outside them), which the source writes as one ``with`` block; None for a layer without one."""
    blocks: list[int | None] = []
    for index, layer in enumerate(layers):
        mode = layer.grad_mode
        joins = (
            index > 0
            and mode is not None
            and layers[index - 1].grad_mode == mode
            and region_of(checkpoints, index - 1) == region_of(checkpoints, index)
        )
        blocks.append(None if mode is None else blocks[-1] if joins else index)
    return blocks


# Grad modes under which nothing a layer makes requires grad.
_NO_GRAD_MODES = ("no_grad", "inference_mode")


class _Flowing:
    """The values made so far, and what eager's rules on in-place updates need to know about them."""

    def __init__(self, incoming: Incoming, modes: dict[int, str] | None = None) -> None:
        self.values = [Value(incoming, 0, None, leaf=True)]
        self.modes = modes or {}  # grad-mode region (its first layer) -> its mode
        self.saved: set[int] = set()  # bases some layer saved for backward
        self.read_by_region: set[int] = set()  # bases some checkpoint took as an input
        self.tensors = [0]  # each value's Python tensor (the first value that is it: an update's value is its target)
        self.base_grads = {0: True}  # whether each base's memory requires grad by now
        self.grad_given: dict[int, tuple[int, int]] = {}  # base -> (the update that gave it grad, its tensor)

    def update_problem(
        self, reads: list[int], region: int | None, block: int | None = None, saves: bool = False
    ) -> str | None:
        """Why eager would reject an in-place update of value ``reads[0]`` (by ``reads[1]``) in ``region`` and
        grad-mode region ``block``; ``saves``: the update saves what it reads for backward."""
        target = self.values[reads[0]]
        if block is not None and self.modes[block] == "autocast":
            return "updates a value in place under autocast (the values' dtypes are autocast's: eager may reject it)"
        if target.view_blocks != {block}:
            return (
                f"updates value {reads[0]}, made under another grad mode, in place (eager rejects updating a view "
                "made in no_grad with grad on, and an inference tensor outside inference mode)"
            )
        if target.overlapping:
            return f"updates value {reads[0]}, whose elements share memory (a view of an expand: eager rejects it)"
        if target.base == 0:
            return "updates the network's input in place (a leaf that requires grad: eager rejects it)"
        if self.values[target.base].leaf and self.values[target.base].requires_grad:
            return f"updates input {target.base}, which requires grad, in place (a leaf or its view: eager rejects it)"
        if target.base in self.saved:
            return f"updates value {reads[0]} in place after a layer saved it for backward (eager's backward fails)"
        if region is not None and self.values[target.base].region != region:
            return f"updates value {reads[0]}, made outside its checkpoint, in place (the recomputation would differ)"
        if target.base in self.read_by_region:
            return f"updates value {reads[0]} in place after a checkpoint took it (its recomputation would differ)"
        if (given := self.grad_given.get(target.base)) and target.base != self.tensors[reads[0]] != given[1]:
            if self.tensors[reads[0]] < given[0]:
                return (
                    f"updates value {reads[0]} in place, a view made before an update of its memory gave it grad "
                    "(eager takes the view for a leaf that requires grad)"
                )
        if len(reads) > 1 and reads[1] != reads[0] and self.values[reads[1]].base == target.base:
            return f"adds value {reads[1]} to value {reads[0]} in place, which share memory (eager rejects it)"
        if len(reads) > 1 and reads[1] == reads[0] and saves:
            return f"updates value {reads[0]} in place from itself by a call whose backward reads both (eager's fails)"
        return None

    def add(self, layer: Any, reads: list[int], region: int | None, block: int | None = None) -> None:
        """Append the value of ``layer``, which reads ``reads`` in ``region`` and grad-mode region ``block``."""
        kind, x = LAYER_KINDS[layer.kind], self.values[reads[0]]
        flow, shape = kind.flow, kind.output(layer.params, x.shape)
        requires_grad = self.modes.get(block) not in _NO_GRAD_MODES and (
            any(self.values[read].requires_grad for read in (reads[:1] if flow and flow.masks else reads))
            or (flow is None and kind.trainable(layer.params) and not layer.frozen)
        )
        if flow is not None and flow.input and flow.fresh:  # a state_input: a leaf argument
            requires_grad = layer.params["requires_grad"]
            value = Value(shape, len(self.values), None, requires_grad=requires_grad, leaf=True)
        elif flow is None or flow.fresh:
            # A new tensor keeps the strides of a dense one it is computed from (clone and elementwise ops do: a
            # clone of a transpose is transposed), so it may not be contiguous where what it read may not be.
            contiguous = not kind.strided and all(self.values[read].contiguous for read in reads)
            value = Value(shape, len(self.values), region, contiguous, False, requires_grad, frozenset({block}))
        else:  # a view of x, or x updated
            contiguous = x.contiguous and (flow.contiguous is None or flow.contiguous(layer.params, x.shape))
            overlapping, requires_grad = x.overlapping or flow.overlaps, requires_grad and not flow.detaches
            value = Value(shape, x.base, region, contiguous, overlapping, requires_grad, x.view_blocks | {block})
        if flow is not None and flow.updates:
            self.tensors.append(self.tensors[reads[0]])
            if requires_grad and not self.base_grads[value.base]:
                self.grad_given[value.base] = (len(self.values), self.tensors[reads[0]])
            self.base_grads[value.base] = self.base_grads[value.base] or requires_grad
        else:
            self.tensors.append(len(self.values))
            self.base_grads.setdefault(value.base, value.requires_grad)
        if flow is None or flow.saves:  # a layer's backward may read what it read (conservatively: any layer's does)
            self.saved |= {self.values[read].base for read in reads}
        if flow is None or flow.saves_value:
            self.saved.add(value.base)
        if region is not None:
            self.read_by_region |= {self.values[read].base for read in reads if self.values[read].region != region}
        self.values.append(value)


def _walk(
    layers: Sequence[Any], checkpoints: Sequence[Any], incoming: Incoming, repair: bool
) -> tuple[list[Any], _Flowing, list[str]]:
    """Follow the values through ``layers``; returns the layers (with ``repair``, each update eager would reject turned
    into its out-of-place twin, its params kept), the values made and the problems found. Shapes and reads are
    assumed valid."""
    blocks = grad_blocks(layers, checkpoints)
    modes = {block: layers[block].grad_mode for block in blocks if block is not None}
    flowing, layers, problems = _Flowing(incoming, modes), list(layers), []
    for index, layer in enumerate(layers):
        reads, region, block = reads_of(layer, index), region_of(checkpoints, index), blocks[index]
        flow = LAYER_KINDS[layer.kind].flow
        if flow is not None and flow.updates and (problem := flowing.update_problem(reads, region, block, flow.saves)):
            if repair:
                layers[index] = layer = replace(layer, kind=flow.twin)
            else:
                problems.append(f"layers[{index}] ({layer.kind}): {problem}")
        if flow is not None and flow.needs_contiguous and not flowing.values[reads[0]].contiguous:
            problems.append(
                f"layers[{index}] ({layer.kind}): value {reads[0]} may not be contiguous (eager's view of it fails, "
                "a reshape copies it: a program's views need it contiguous)"
            )
        flowing.add(layer, reads, region, block)
    return layers, flowing, problems


def values(layers: Sequence[Any], checkpoints: Sequence[Any], incoming: Incoming) -> list[Value]:
    """Every value of a program: its input, then each layer's output."""
    return _walk(layers, checkpoints, incoming, repair=False)[1].values


def inference_in_selective(layers: Sequence[Any], checkpoints: Sequence[Any]) -> list[int]:
    """The layers under inference_mode inside a selective checkpoint: its policy saves what they make, which eager
    rejects ("Inference tensors do not track version counter")."""
    return [
        index
        for index, layer in enumerate(layers)
        if layer.grad_mode == "inference_mode"
        and (number := region_of(checkpoints, index)) is not None
        and checkpoints[number].selective
    ]


def an_output_requires_grad(spec: Any) -> bool:
    """Whether some value the program returns requires grad (its input does; a value made under no_grad or
    inference_mode, or detached, does not)."""
    made = values(spec.layers, spec.checkpoints, spec._input())
    return any(made[value].requires_grad for value in outputs_of(spec))


def with_a_graph(spec: Any) -> Any:
    """``spec``, with its input returned too where no output requires grad (every one made under no_grad, detached,
    or needing grad only through an update taken out), so that backward has a graph."""
    return spec if an_output_requires_grad(spec) else replace(spec, outputs=[*outputs_of(spec), 0])


def update_problems(layers: Sequence[Any], checkpoints: Sequence[Any], incoming: Incoming) -> list[str]:
    """What eager would reject among the program's in-place updates, one line each."""
    return _walk(layers, checkpoints, incoming, repair=False)[2]


def repaired(layers: Sequence[Any], checkpoints: Sequence[Any], incoming: Incoming) -> list[Any]:
    """``layers`` with each in-place update eager would reject replaced by its out-of-place twin."""
    return _walk(layers, checkpoints, incoming, repair=True)[0]


def updatable(layers: Sequence[Any], checkpoints: Sequence[Any], incoming: Incoming, region: int | None) -> list[int]:
    """The values that a next layer, in checkpoint ``region`` (None: outside) and under the network's grad mode,
    may update in place."""
    flowing = _walk(layers, checkpoints, incoming, repair=False)[1]
    return [value for value in range(len(flowing.values)) if flowing.update_problem([value], region) is None]


def outputs_of(spec: Any) -> list[int]:
    """The values a program returns."""
    return list(spec.outputs) if spec.outputs is not None else [len(spec.layers)]


def region_inputs(spec: Any, number: int) -> list[int]:
    """The values checkpoint ``number`` takes: those its layers read that are made before it, in order of reading."""
    ckpt = spec.checkpoints[number]
    reads = [read for index in range(ckpt.start, ckpt.stop) for read in reads_of(spec.layers[index], index)]
    return list(dict.fromkeys(read for read in reads if read <= ckpt.start))


def region_outputs(spec: Any, number: int) -> list[int]:
    """The values checkpoint ``number`` returns: its own values read after it or returned by the network (all of
    them with ``multi_output``; its last one when none is)."""
    ckpt = spec.checkpoints[number]
    own = range(ckpt.start + 1, ckpt.stop + 1)
    if ckpt.multi_output:
        return list(own)
    later = {read for index in range(ckpt.stop, len(spec.layers)) for read in reads_of(spec.layers[index], index)}
    used = [value for value in own if value in later or value in outputs_of(spec)]
    return used or [ckpt.stop]


def _is_value(value: Any, last: int) -> bool:
    return is_int(value) and 0 <= value <= last


def program_problems(spec: Any) -> list[str]:
    """What a program's own fields get wrong: its input, its outputs, its checkpoints."""
    problems = []
    if not (spec.seq is None and spec.spatial is None and spec.vocab is None and spec.autocast is None):
        problems.append("a program takes a (batch, features) input: no seq, spatial, vocab or autocast")
    outputs = spec.outputs if spec.outputs is not None else [len(spec.layers)]
    if not (isinstance(outputs, list) and outputs and all(_is_value(v, len(spec.layers)) for v in outputs)):
        problems.append(f"outputs must be a non-empty list of values 0..{len(spec.layers)}, got {spec.outputs!r}")
    for index, ckpt in enumerate(spec.checkpoints):
        if ckpt.api != "checkpoint" or ckpt.nested or ckpt.use_reentrant:
            problems.append(
                f"checkpoints[{index}]: a program's checkpoints are api 'checkpoint', not nested or reentrant"
            )
    return problems


def is_input(layers: Sequence[Any], value: int) -> bool:
    """Whether ``value`` is one of a program's inputs: value 0, or the value of a ``state_input`` or ``input_view``."""
    return value == 0 or bool((flow := LAYER_KINDS[layers[value - 1].kind].flow) and flow.input)


def further_inputs(layers: Sequence[Any]) -> list[int]:
    """The values of a program's inputs beyond ``x`` (`is_input`), in order."""
    return [value for value in range(1, len(layers) + 1) if is_input(layers, value)]


def input_problems(spec: Any) -> list[str]:
    """What a program gets wrong about its inputs beyond the first (`fuzz.generate.flow.INPUT_KINDS`): each is an
    argument, made before the call (outside checkpoints and grad modes; an ``input_view`` of an input's tensor), and
    a network of several inputs makes one forward and backward (no training steps)."""
    problems = []
    for index, layer in enumerate(spec.layers):
        if not is_input(spec.layers, index + 1):
            continue
        if region_of(spec.checkpoints, index) is not None or layer.grad_mode is not None:
            problems.append(f"layers[{index}] ({layer.kind}): an input is an argument: no checkpoint, no grad mode")
        if layer.kind == "input_view" and not is_input(spec.layers, layer.reads[0]):
            problems.append(
                f"layers[{index}] (input_view): reads value {layer.reads[0]}, which is not an input (an input_view is "
                "an argument viewing another argument's tensor: read value 0 or a state_input's or input_view's)"
            )
        if spec.training is not None:
            problems.append(f"layers[{index}] ({layer.kind}): a program of several inputs does not train")
    return problems


def input_update(spec: Any, index: int) -> frozenset[str]:
    """What layer ``index`` does to the program's inputs when it updates an input's memory in place (empty for any
    other layer): "input" always; "gives grad": the memory needed no grad and the update's value needs it;
    "aliased": another input shares that memory (an ``input_view``); "through a view": it updates a view the program
    made of the input, not an argument itself."""
    flow = LAYER_KINDS[spec.layers[index].kind].flow
    if flow is None or not flow.updates:
        return frozenset()
    flowing = _walk(spec.layers[: index + 1], spec.checkpoints, spec._input(), repair=False)[1]
    made, target = flowing.values, spec.layers[index].reads[0]
    arguments = [value for value in range(len(made)) if is_input(spec.layers, value)]
    base = made[target].base
    if base not in {made[value].base for value in arguments}:
        return frozenset()
    traits = {"input"}
    if flowing.grad_given.get(base, (None,))[0] == index + 1:
        traits.add("gives grad")
    if sum(made[value].base == base for value in arguments) > 1:
        traits.add("aliased")
    if target not in arguments:
        traits.add("through a view")
    return frozenset(traits)


def reads_problems(layers: Sequence[Any], index: int, shapes: Sequence[Incoming]) -> list[str]:
    """What layer ``index`` of a program gets wrong in what it reads (every layer of a program lists it: as many
    earlier values as its kind reads, of one shape); ``shapes``: those of values ``0 .. index``."""
    layer, kind = layers[index], LAYER_KINDS[layers[index].kind]
    if kind.mutates_input:
        return [f"layers[{index}] ({layer.kind}): a program updates values with add_, mul_ or sigmoid_, not in a layer"]
    count, reads = 1 if kind.flow is None else kind.flow.reads, layer.reads
    if not (isinstance(reads, list) and len(reads) == count and all(_is_value(read, index) for read in reads)):
        return [f"layers[{index}] ({layer.kind}): reads must be {count} value(s) among 0..{index}, got {layer.reads!r}"]
    if any(shapes[read] != shapes[reads[0]] for read in reads):
        found = ", ".join(f"({shapes[read].batch}, {shapes[read].width})" for read in reads)
        return [f"layers[{index}] ({layer.kind}): the values it reads must have one shape, got {found}"]
    return []


def ancestors(spec: Any, index: int) -> set[int]:
    """The layers whose values flow into layer ``index`` (``len(spec.layers)``: into the network's output): what it
    reads, transitively, and every earlier in-place update of the memory of what it reads. In a stack, every layer
    before it."""
    if not spec.is_program:
        return set(range(index))
    made = values(spec.layers, spec.checkpoints, spec._input())
    updates = [j for j, layer in enumerate(spec.layers) if (flow := LAYER_KINDS[layer.kind].flow) and flow.updates]
    found: set[int] = set()
    pending = [index]
    while pending:
        node = pending.pop()
        for read in reads_of(spec.layers[node], node) if node < len(spec.layers) else outputs_of(spec):
            earlier = [j for j in updates if j < node and made[j + 1].base == made[read].base]
            for layer in ([read - 1] if read else []) + earlier:
                if layer not in found:
                    found.add(layer)
                    pending.append(layer)
    return found
