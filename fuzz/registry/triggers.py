"""The predicates known-issue entries name: which layers of a spec trigger an entry, and what the network is
without them."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from fuzz.generate.layers import LAYER_KINDS
from fuzz.generate.reduce import without_layers
from fuzz.generate.spec import LayerSpec, NetSpec
from fuzz.registry.issue import KnownIssue, LayerTrigger


def layer_issue(
    id: str,
    description: str,
    failure_classes: tuple[str, ...],
    trigger: LayerTrigger,
    without_trigger: Callable[[NetSpec], NetSpec] | None = None,
) -> KnownIssue:
    """An issue set off by single layers (``trigger(spec, index)``); by default removed by deleting those layers."""
    return KnownIssue(
        id,
        description,
        failure_classes,
        lambda spec: any(trigger(spec, i) for i in range(len(spec.layers))),
        without_trigger
        or (lambda spec: without_layers(spec, [i for i in range(len(spec.layers)) if trigger(spec, i)])),
    )


def as_linear(trigger: LayerTrigger) -> Callable[[NetSpec], NetSpec]:
    """Replace each layer ``trigger`` accepts (a Linear followed by an in-place activation) by its Linear."""

    def strip(spec: NetSpec) -> NetSpec:
        layers = [
            LayerSpec("linear", {"out_features": layer.params["out_features"], "bias": True}, layer.frozen)
            if trigger(spec, i)
            else layer
            for i, layer in enumerate(spec.layers)
        ]
        return replace(spec, layers=layers)

    return strip


def is_inplace_silu(spec: NetSpec, index: int) -> bool:
    return spec.layers[index].kind == "linear_silu_inplace"


def inplace_activation_after_narrow(spec: NetSpec, index: int) -> bool:
    """A Linear with an in-place activation (not the residual) after a narrow_swap."""
    return spec.layers[index].kind in ("linear_relu_inplace", "linear_silu_inplace") and any(
        earlier.kind == "narrow_swap" for earlier in spec.layers[:index]
    )


def thunder_runs_it(spec: NetSpec) -> bool:
    """Whether thunder compiles the network and is judged against eager: dynamo runs a network with a
    checkpoint_sequential eagerly, and a random network is judged against thunder itself."""
    return not spec.random and not any(c.api == "sequential" for c in spec.checkpoints)


def in_compiled_checkpoint(spec: NetSpec, index: int) -> bool:
    # checkpoint_sequential regions are never compiled (dynamo runs them eagerly), so they cannot show thunder bugs.
    return any(c.start <= index < c.stop and c.api != "sequential" for c in spec.checkpoints)


def dropout_layer_in_compiled_checkpoint(spec: NetSpec, index: int) -> bool:
    return spec.device == "cpu" and LAYER_KINDS[spec.layers[index].kind].random and in_compiled_checkpoint(spec, index)


def dropout_in_compiled_checkpoint(spec: NetSpec) -> bool:
    """A transformers model on CPU with dropout in its checkpointed layers."""
    return spec.device == "cpu" and spec.model is not None and spec.model.dropout > 0 and spec.model.checkpointing


def op_layer(ops: tuple[str, ...], where: Callable[[dict], bool] = lambda params: True) -> LayerTrigger:
    """A trigger: an op layer (fuzz.generate.ops) of one of ``ops`` whose params satisfy ``where``."""
    return lambda spec, i: spec.layers[i].params.get("op") in ops and where(spec.layers[i].params)


def float_tensor_args(params: dict) -> list[dict]:
    return [a for a in [*params["args"], *params["kwargs"].values()] if isinstance(a, dict) and "tensor" in a]


# In-place ops whose gradient thunderfx gets wrong (or crashes on) outside checkpoints, measured with
# Linear -> adapt -> clone -> op_ (see inplace-op-on-clone-wrong-grad).
INPLACE_WRONG = frozenset(
    "abs acos asin atan cos cosh digamma erf erfc erfinv exp2 expm1 sin sinh sqrt lgamma log log10 log1p log2 "
    "square copysign fmod div remainder prims_remainder".split()
)


def view_update(where: Callable[[dict, bool], bool]) -> LayerTrigger:
    """A trigger: an in-place update through a view (`view_update`, `input_update`) whose params satisfy ``where``
    (its second argument: whether the layer runs in a compiled checkpoint)."""
    return lambda spec, i: (
        spec.layers[i].kind in ("view_update", "input_update")
        and where(spec.layers[i].params, in_compiled_checkpoint(spec, i))
    )


# Ops whose output can far exceed their input's range (inputs are mapped into thunder's sample ranges).
EXPLOSIVE = frozenset(
    "sinh cosh exp exp2 expm1 pow square tan reciprocal ldexp lgamma digamma polygamma zeta div true_divide".split()
)


def applies(activation: str, *kinds: str) -> Callable[[LayerSpec], bool]:
    """Whether a layer applies ``activation``: its own kind, the op, an MLP's activation, or one of ``kinds``."""
    return lambda layer: (
        layer.kind in (activation, *kinds)
        or layer.params.get("op") == activation
        or (layer.kind in ("mlp", "residual") and layer.params.get("activation") == activation)
    )


# SwiGLU computes silu(fc_1(x)) * fc_2(x); the transformer and decoder blocks hold one; the conv blocks call F.silu.
applies_silu = applies(
    "silu", "linear_silu_inplace", "swiglu", "transformer_block", "decoder_block", "conv_block", "unet_block"
)


def applies_sigmoid(layer: LayerSpec) -> bool:
    """A sigmoid, or a silu (x sigmoid(x))."""
    return applies("sigmoid")(layer) or applies_silu(layer)


applies_gelu = applies("gelu")


ATTENTION_KINDS = ("attention", "transformer_block", "decoder_block")


def stride(params: dict) -> object:
    """A pooling call's stride: keyword, third positional argument, or the default None."""
    return params["kwargs"].get("stride", params["args"][2] if len(params["args"]) > 2 else None)


def masks_a_whole_row(literal: object) -> bool:
    """A boolean tensor literal (fuzz.generate.ops) with a row that is all False."""
    if not (isinstance(literal, dict) and literal.get("dtype") == "bool"):
        return False

    def rows(values: object) -> list:
        if isinstance(values, list) and values and not isinstance(values[0], list):
            return [values]
        return [row for item in values for row in rows(item)] if isinstance(values, list) else []

    return any(not any(row) for row in rows(literal["values"]))


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
