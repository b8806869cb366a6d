"""The trigger vocabulary of known-issue entries: conditions over one node of a network (a layer), the named
predicates that are its escape hatch, and what the network is without the nodes that set an entry off.

A trigger is a table of conditions that must all hold for one node (docs/known-issues.md lists every key and
predicate); an entry is set off when any of its triggers matches any node.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from fuzz.generate import program
from fuzz.generate.layers import LAYER_KINDS
from fuzz.generate.reduce import without_layers
from fuzz.generate.spec import LayerSpec, NetSpec
from fuzz.generate.spec_parts import GRAD_MODES

NodePredicate = Callable[[NetSpec, int], bool]


class EntryError(ValueError):
    """A known-issue entry whose file does not say a claim the registry can read (the message names file and key)."""


def in_compiled_checkpoint(spec: NetSpec, index: int) -> bool:
    # checkpoint_sequential regions are never compiled (dynamo runs them eagerly), so they cannot show thunder bugs.
    return any(c.start <= index < c.stop and c.api != "sequential" for c in spec.checkpoints)


def under_autocast(spec: NetSpec, index: int) -> bool:
    return spec.autocast == "forward" or (spec.autocast == "checkpoints" and spec.checkpointed(index))


# Kinds that compute an activation inside them, beyond the kind, op or MLP activation of that name: SwiGLU computes
# silu(fc_1(x)) * fc_2(x), the transformer and decoder blocks hold one, the conv blocks call F.silu.
_KINDS_HOLDING = {
    "silu": ("linear_silu_inplace", "swiglu", "transformer_block", "decoder_block", "conv_block", "unet_block"),
}
_IMPLIED_BY = {"sigmoid": ("silu",)}  # a silu is x * sigmoid(x)


def computes(layer: LayerSpec, activation: str) -> bool:
    """Whether ``layer`` computes ``activation``: its own kind, its op, an MLP's activation, a kind holding one, or an
    activation that computes it."""
    return (
        layer.kind == activation
        or layer.kind in _KINDS_HOLDING.get(activation, ())
        or layer.params.get("op") == activation
        or (layer.kind in ("mlp", "residual") and layer.params.get("activation") == activation)
        or any(computes(layer, implying) for implying in _IMPLIED_BY.get(activation, ()))
    )


def float_tensor_args(params: dict) -> list[dict]:
    """An op layer's tensor arguments (fuzz.generate.ops literals), positional then keyword."""
    return [a for a in _literals(params) if "tensor" in a]


def ints(literal: object) -> list[int]:
    """Every integer in a literal argument list (fuzz.generate.ops encoding)."""
    if isinstance(literal, bool):
        return []
    if isinstance(literal, int):
        return [literal]
    if isinstance(literal, list):
        return [i for item in literal for i in ints(item)]
    if isinstance(literal, dict) and "tensor" not in literal:
        return [i for item in literal.values() for i in ints(item)]
    return []


def _masks_a_whole_row(literal: object) -> bool:
    """A boolean tensor literal with a row that is all False."""
    if not (isinstance(literal, dict) and literal.get("dtype") == "bool"):
        return False

    def rows(values: object) -> list:
        if isinstance(values, list) and values and not isinstance(values[0], list):
            return [values]
        return [row for item in values for row in rows(item)] if isinstance(values, list) else []

    return any(not any(row) for row in rows(literal["values"]))


def _literals(params: dict) -> list[dict]:
    """An op layer's tensor arguments, float (`float_tensor_args`) or given by value (a boolean mask)."""
    return [a for a in [*params["args"], *params["kwargs"].values()] if isinstance(a, dict)]


def _elements(literal: dict) -> int:
    """How many elements a tensor literal holds (a float tensor by its shape, one given by value by its values)."""
    if "tensor" in literal:
        return math.prod(literal["tensor"])
    values = literal.get("values", [])
    return sum(_elements({"values": v}) for v in values) if isinstance(values, list) else 1


def _number(literal: object) -> bool:
    return isinstance(literal, int | float) and not isinstance(literal, bool)


def _tensor_dtype(literal: object) -> str | None:
    """A float tensor literal's own dtype (a partner cast by the op family's dtype axis), else None."""
    return literal.get("dtype") if isinstance(literal, dict) and "tensor" in literal else None


def _used_under_two_names(spec: NetSpec, index: int) -> bool:
    flow = LAYER_KINDS[spec.layers[index].kind].flow
    if flow is None or not flow.updates:
        return False
    returned = program.outputs_of(spec)
    return all(
        value in returned or program.read_after(spec.layers, value, index)
        for value in (spec.layers[index].reads[0], index + 1)
    )


def _op_params(where: Callable[[dict], bool]) -> NodePredicate:
    return lambda spec, i: "op" in spec.layers[i].params and where(spec.layers[i].params)


# The escape hatch: conditions the vocabulary cannot say, each named here and listed in docs/known-issues.md.
NODE_PREDICATES: dict[str, NodePredicate] = {
    # Some layer before this one, in the network's order (not its data flow), is a narrow_swap.
    "after-a-narrow": lambda spec, i: any(layer.kind == "narrow_swap" for layer in spec.layers[:i]),
    # A program's value the network's output does not depend on (a stack has none).
    "unused": lambda spec, i: i not in program.ancestors(spec, len(spec.layers)),
    "zero-dim-tensor-partner": _op_params(lambda p: any(a["tensor"] == [] for a in float_tensor_args(p)[1:])),
    "zero-dim-beside-a-larger-tensor": _op_params(
        lambda p: any(a["tensor"] == [] for a in float_tensor_args(p)) and any(_elements(a) > 1 for a in _literals(p))
    ),
    "all-tensors-zero-dim": _op_params(lambda p: all(a["tensor"] == [] for a in float_tensor_args(p))),
    "unbatched-first-tensor": _op_params(lambda p: len(float_tensor_args(p)[0]["tensor"]) == 1),
    "zero-in-size-args": _op_params(lambda p: 0 in ints(p["args"][1:])),
    # topk's k, repeat_interleave's repeats: the second positional argument or that keyword.
    "zero-count": _op_params(lambda p: 0 in ints([p["kwargs"].get("k"), p["kwargs"].get("repeats"), *p["args"][1:2]])),
    # pow's exponent (second argument or keyword) is the number 0 and its base's values reach 0.
    "zero-exponent": _op_params(
        lambda p: (
            _number(exponent := p["kwargs"].get("exponent", (p["args"] + [None, None])[1]))
            and exponent == 0
            and float_tensor_args(p)[0]["low"] <= 0 <= float_tensor_args(p)[0]["high"]
        )
    ),
    # A pooling call's padding: keyword, or fourth positional argument (default 0).
    "pooling-padding": _op_params(lambda p: any(ints([p["kwargs"].get("padding", (p["args"] + [0] * 4)[3])]))),
    "negative-correction": _op_params(lambda p: _number(c := p["kwargs"].get("correction")) and c < 0),
    "negative-padding": _op_params(lambda p: any(i < 0 for i in ints([*p["args"][1:2], p["kwargs"].get("pad")]))),
    # A pooling call's stride: keyword, third positional argument, or the default None.
    "stride-none": _op_params(lambda p: p["kwargs"].get("stride", (p["args"] + [None] * 3)[2]) is None),
    # A bias (the keyword, or the third positional argument, as in the convolutions) cast to float64.
    "float64-bias": _op_params(
        lambda p: _tensor_dtype(p["kwargs"].get("bias", (p["args"] + [None] * 3)[2])) == "float64"
    ),
    # batch_norm/instance_norm given running statistics (a second positional tensor) to update (sixth positional True).
    "updates-running-stats": _op_params(
        lambda p: isinstance((p["args"] + [None] * 2)[1], dict) and (p["args"] + [None] * 6)[5] is True
    ),
    "reduces-over-a-dim": _op_params(lambda p: len(p["args"]) > 1 or "dim" in p["kwargs"]),
    "masks-a-whole-row": _op_params(lambda p: any(_masks_a_whole_row(a) for a in [*p["args"], *p["kwargs"].values()])),
    # A program's in-place update of an input's memory (`fuzz.generate.program.input_update`): any, one that gives an
    # input needing no grad grad, one of memory another input shares, one through a view the program made of an input.
    "updates-an-input": lambda spec, i: spec.is_program and "input" in program.input_update(spec, i),
    "gives-an-input-grad": lambda spec, i: spec.is_program and "gives grad" in program.input_update(spec, i),
    "updates-an-aliased-input": lambda spec, i: spec.is_program and "aliased" in program.input_update(spec, i),
    "updates-an-input-through-a-view": lambda spec, i: (
        spec.is_program and "through a view" in program.input_update(spec, i)
    ),
    # What enters the node has one element (a (1, 1) program value, a one-feature batch of one).
    "reads-one-element": lambda spec, i: (
        (shape := spec.incoming()[i]).batch * shape.width * math.prod(shape.spatial or ()) == 1
    ),
    # A program's in-place update whose result and the value it updated (one tensor, two names) are both read after
    # it or returned.
    "used-under-two-names": lambda spec, i: spec.is_program and _used_under_two_names(spec, i),
    "one-feature-per-head-batched": lambda spec, i: (
        spec.batch >= 2 and spec.layers[i].params.get("heads") == spec.widths()[i] >= 2
    ),
}


def _judged_against_eager(spec: NetSpec) -> bool:
    # dynamo runs a network with a checkpoint_sequential eagerly, and a random network is judged against thunder.
    return not spec.random and not any(c.api == "sequential" for c in spec.checkpoints)


# Conditions over the whole network, each with the network without it (what `without_trigger` applies).
SPEC_PREDICATES: dict[str, tuple[Callable[[NetSpec], bool], Callable[[NetSpec], NetSpec] | None]] = {
    "reentrant-checkpoint": (
        lambda spec: any(c.use_reentrant for c in spec.checkpoints),
        lambda spec: replace(spec, checkpoints=[replace(c, use_reentrant=False) for c in spec.checkpoints]),
    ),
    "nested-checkpoint": (
        lambda spec: any(c.nested for c in spec.checkpoints),
        lambda spec: replace(spec, checkpoints=[replace(c, nested=False) for c in spec.checkpoints]),
    ),
    "selective-checkpoint": (
        lambda spec: any(c.selective for c in spec.checkpoints),
        lambda spec: replace(spec, checkpoints=[replace(c, selective=False) for c in spec.checkpoints]),
    ),
    "model-dropout-in-checkpoints": (
        lambda spec: spec.model is not None and spec.model.dropout > 0 and spec.model.checkpointing,
        lambda spec: replace(spec, model=replace(spec.model, dropout=0.0)),
    ),
    "model-sdpa-attention": (
        lambda spec: spec.model is not None and spec.model.attention == "sdpa",
        lambda spec: replace(spec, model=replace(spec.model, attention="eager")),
    ),
    # Training steps whose batch size changes: dynamo recompiles the network with a dynamic batch dim.
    "batch-size-changes": (
        lambda spec: spec.training is not None and len(set(spec.training.batches or ())) > 1,
        lambda spec: replace(spec, training=replace(spec.training, batches=None)),
    ),
    # A condition on a node's network, not a trigger of its own: taking it out is taking the node out.
    "judged-against-eager": (_judged_against_eager, None),
}


def _as_linear(layer: LayerSpec) -> LayerSpec:
    return replace(layer, kind="linear", params={"out_features": layer.params["out_features"], "bias": True})


def _under_the_network_mode(layer: LayerSpec) -> LayerSpec:
    return replace(layer, grad_mode=None)


# How a triggering node is taken out; deleting it is the default. "network-mode": its grad-mode region dropped (a
# program's layer then runs under the network's own mode).
WITHOUT = {"delete": None, "as-linear": _as_linear, "network-mode": _under_the_network_mode}


def _one_of(value: object, allowed: object) -> bool:
    return value in allowed if isinstance(allowed, list) else value == allowed


def _params_hold(params: Mapping[str, Any], wanted: Mapping[str, Any]) -> bool:
    return all(key in params and _one_of(params[key], value) for key, value in wanted.items())


def _params_differ(params: Mapping[str, Any], unwanted: Mapping[str, Any]) -> bool:
    return not any(key in params and _one_of(params[key], value) for key, value in unwanted.items())


# The keys of a trigger about the whole network: a test of (spec, the key's value).
_NETWORK_CONDITIONS: dict[str, Callable[[NetSpec, Any], bool]] = {
    "dtype": lambda spec, v: _one_of(spec.dtype, v),
    "device": lambda spec, v: _one_of(spec.device, v),
    "token_input": lambda spec, v: (spec.vocab is not None) == v,
    "network": lambda spec, v: all(SPEC_PREDICATES[name][0](spec) for name in _names(v)),
}
# The keys about one node: a test of (spec, node index, the key's value).
_NODE_CONDITIONS: dict[str, Callable[[NetSpec, int, Any], bool]] = {
    "kind": lambda spec, i, v: _one_of(spec.layers[i].kind, v),
    "op": lambda spec, i, v: _one_of(spec.layers[i].params.get("op"), v),
    "computes": lambda spec, i, v: any(computes(spec.layers[i], name) for name in _names(v)),
    "params": lambda spec, i, v: _params_hold(spec.layers[i].params, v),
    "params_not": lambda spec, i, v: _params_differ(spec.layers[i].params, v),
    "random": lambda spec, i, v: LAYER_KINDS[spec.layers[i].kind].random == v,
    "checkpoint": lambda spec, i, v: in_compiled_checkpoint(spec, i) == (v == "inside"),
    "autocast": lambda spec, i, v: under_autocast(spec, i) == v,
    "grad_mode": lambda spec, i, v: _one_of(spec.layers[i].grad_mode, v),
    # What flows into a node (in a stack, every node before it; `fuzz.generate.program.ancestors`), and out of it.
    "reads": lambda spec, i, v: any(node_matches(spec, j, v) for j in program.ancestors(spec, i)),
    "read_by": lambda spec, i, v: any(
        node_matches(spec, j, v) for j in range(i + 1, len(spec.layers)) if i in program.ancestors(spec, j)
    ),
    "predicate": lambda spec, i, v: all(NODE_PREDICATES[name](spec, i) for name in _names(v)),
}
TRIGGER_KEYS = frozenset(_NETWORK_CONDITIONS) | frozenset(_NODE_CONDITIONS) | {"without"}
_CHOICES = {"checkpoint": ("inside", "outside"), "predicate": NODE_PREDICATES, "network": SPEC_PREDICATES,
            "without": WITHOUT, "grad_mode": GRAD_MODES}  # fmt: skip


def _names(value: str | list[str]) -> list[str]:
    return value if isinstance(value, list) else [value]


def is_network_trigger(trigger: Mapping[str, Any]) -> bool:
    """A trigger set off by the network as a whole (``network`` naming a condition with its own undoing, and
    nothing about a node), not by a node."""
    return (
        "network" in trigger
        and trigger.keys() <= _NETWORK_CONDITIONS.keys()
        and all(SPEC_PREDICATES[name][1] is not None for name in _names(trigger["network"]))
    )


def _network_holds(spec: NetSpec, trigger: Mapping[str, Any]) -> bool:
    return all(test(spec, trigger[key]) for key, test in _NETWORK_CONDITIONS.items() if key in trigger)


def node_matches(spec: NetSpec, index: int, trigger: Mapping[str, Any]) -> bool:
    """Whether every condition of ``trigger`` (a `check_trigger`-ed table) holds for node ``index`` of ``spec``."""
    return _network_holds(spec, trigger) and all(
        test(spec, index, trigger[key]) for key, test in _NODE_CONDITIONS.items() if key in trigger
    )


# What each key's value must be, in words, and the test of it.
_NAMES, _NAME, _TABLE, _BOOL = "a name or a list of names", "a name", "a table", "true or false"
_VALUES = {
    **dict.fromkeys(("kind", "op", "computes", "dtype", "device", "predicate", "network", "grad_mode"), _NAMES),
    **dict.fromkeys(("params", "params_not", "reads", "read_by"), _TABLE),
    **dict.fromkeys(("random", "autocast", "token_input"), _BOOL),
    **dict.fromkeys(("checkpoint", "without"), _NAME),
}
_IS = {
    _NAMES: lambda v: isinstance(v, str) or (isinstance(v, list) and v and all(isinstance(n, str) for n in v)),
    _NAME: lambda v: isinstance(v, str),
    _TABLE: lambda v: isinstance(v, dict),
    _BOOL: lambda v: isinstance(v, bool),
}


def check_trigger(trigger: object, where: str, nested: bool = False) -> None:
    """Raise `EntryError` (one line, naming ``where``) when ``trigger`` is not a table of known keys and values, or
    (not ``nested`` in ``reads``/``read_by``, where ``{}`` means any node) names no node and is no network trigger."""
    if not isinstance(trigger, dict):
        raise EntryError(f"{where}: a trigger is a table of conditions, got {trigger!r}")
    for key, value in trigger.items():
        if key not in TRIGGER_KEYS:
            raise EntryError(f"{where}: unknown trigger key {key!r}; known: {', '.join(sorted(TRIGGER_KEYS))}")
        if not _IS[_VALUES[key]](value):
            raise EntryError(f"{where}: {key} = {value!r} must be {_VALUES[key]}")
        if key in ("reads", "read_by"):
            check_trigger(value, f"{where}.{key}", nested=True)
        choices = LAYER_KINDS if key == "kind" else _CHOICES.get(key)
        if choices is not None and not all(name in choices for name in _names(value)):
            raise EntryError(f"{where}: {key} = {value!r} is not one of {', '.join(choices)}")
    if not nested and not trigger.keys() & _NODE_CONDITIONS.keys() and not is_network_trigger(trigger):
        raise EntryError(
            f"{where}: names no node ({', '.join(sorted(_NODE_CONDITIONS))}) and is no network trigger (network = "
            f"one or more of {', '.join(n for n, (_, undo) in SPEC_PREDICATES.items() if undo)}, alone or with "
            "dtype, device, token_input)"
        )


def triggered(spec: NetSpec, trigger: Mapping[str, Any]) -> bool:
    """Whether ``trigger`` holds for ``spec``: as a network trigger, or for some node."""
    if is_network_trigger(trigger):
        return _network_holds(spec, trigger)
    return any(node_matches(spec, i, trigger) for i in range(len(spec.layers)))


def without_triggers(spec: NetSpec, triggers: list[Mapping[str, Any]]) -> NetSpec:
    """``spec`` with what sets ``triggers`` off taken out: each network trigger that holds undone, then each node a
    trigger matches deleted or replaced (its first matching trigger's ``without``)."""
    for trigger in triggers:
        if is_network_trigger(trigger) and _network_holds(spec, trigger):
            for name in _names(trigger["network"]):
                spec = SPEC_PREDICATES[name][1](spec)
    node_triggers = [t for t in triggers if not is_network_trigger(t)]
    undo = {}
    for i in range(len(spec.layers)):
        matching = [t for t in node_triggers if node_matches(spec, i, t)]
        if matching:
            undo[i] = WITHOUT[matching[0].get("without", "delete")]
    layers = [undo[i](layer) if undo.get(i) else layer for i, layer in enumerate(spec.layers)]
    deleted = [i for i, how in undo.items() if how is None]
    return without_layers(replace(spec, layers=layers), deleted)
