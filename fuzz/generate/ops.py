"""The op layer family: one call of a torch op thunder maps, recorded as literals, and the source it emits.

An op layer's parameters are plain JSON (see docs/spec.md): the op's name in thunder's OpInfo
database, the call form, the torch callable and the call's arguments as literals. Every float
tensor argument is drawn from the layer's input by `adapt` (cut or padded to the argument's shape and
mapped into the value range thunder's sample inputs use, so domain-restricted ops stay finite),
integer and boolean tensors are literal values, and `fold` turns every floating output back
into the input's shape. `adapt` and `fold` are copied verbatim into every network's source.

That plumbing runs inside the op's checkpoint, under thunder, but it is not the op: an op layer's plumbing twin
(`plumbing_params`, the ``op_plumbing`` kind) is the same layer with the op's call replaced by identity, its tensor
arguments adapted and folded back exactly as before. A failure is blamed on an op only where its twin passes, and
where its stand-in passes too (`stand_in_source`, the ``stand_in`` kind: another op of the same shape and arity in
its place, `fuzz.generate.reduce`): a failure that stays with the op replaced by identity is its plumbing's, and one
that stays with any op in its place is no op's (a checkpoint that stopped recomputing, a converter-wide fault).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

# Call forms, simplest first. The checkpoint converter rewrites call_function nodes only, so
# `torch.op(t)`, `t.op()` and `nn.Op()(t)` are different code paths through it.
FORMS = ("function", "method", "inplace", "module")
FUNCTION_FORMS = FORMS[:3]


# The functions of `fuzz.generate.blocks` that op layers' source calls (copied into every network that has op layers).
HELPERS = ("adapt", "spread", "fold")


def render(value: Any) -> str:
    """Python source for one literal argument (the encoding `fuzz.generate.op_catalog` writes)."""
    if isinstance(value, list):
        return f"[{', '.join(render(v) for v in value)}]"
    if isinstance(value, dict):
        if "tensor" in value:
            return _tensor_source(value)
        if "values" in value:
            return f"torch.tensor({value['values']!r}, dtype=torch.{value['dtype']}, device=x.device)"
        if "tuple" in value:
            items = [render(v) for v in value["tuple"]]
            return f"({', '.join(items)}{',' if len(items) == 1 else ''})"
        if "dtype" in value:
            return f"torch.{value['dtype']}"
        if "device" in value:
            return "x.device"
        if "slice" in value:
            return f"slice({', '.join(render(v) for v in value['slice'])})"
        if "float" in value:
            return f"float({value['float']!r})"
        raise ValueError(f"not an encoded literal: {value!r}")
    if isinstance(value, float) and not math.isfinite(value):
        return f"float({str(value)!r})"
    return repr(value)


def _tensor_source(literal: dict[str, Any]) -> str:
    """A float tensor literal: adapted from ``x`` (spread, for a constant), in its layout and dtype (`axes`)."""
    shape, layout = list(literal["tensor"]), literal.get("layout")
    made = shape  # the shape made before the layout's view
    if layout == "transposed":
        made = [*shape[:-2], shape[-1], shape[-2]]
    elif layout == "strided":
        made = [*shape[:-1], 2 * shape[-1]]
    elif layout == "expanded":
        expanded = next(i for i, size in enumerate(shape) if size > 1)
        made = [*shape[:expanded], 1, *shape[expanded + 1 :]]
    if not literal.get("grad", True):  # e.g. batch norm's running statistics: constants, no graph
        source = f"spread(x, {tuple(made)}, {literal['low']!r}, {literal['high']!r})"
    else:
        source = f"adapt(x, {tuple(made)}, {literal['low']!r}, {literal['high']!r}, {literal['offset']})"
    views = {
        "transposed": ".transpose(-2, -1)",
        "strided": "[..., ::2]",
        "expanded": f".expand({tuple(shape)})",
        "channels last": f".contiguous(memory_format=torch.channels_last{'_3d' if len(shape) == 5 else ''})",
    }
    cast = f".to(torch.{literal['dtype']})" if "dtype" in literal else ""  # a partner's own dtype (type promotion)
    return source + views.get(layout, "") + cast


def _arguments(args: list, kwargs: Mapping[str, Any]) -> str:
    return ", ".join([*(render(a) for a in args), *(f"{k}={render(v)}" for k, v in kwargs.items())])


def call_source(params: Mapping[str, Any], module: str = "") -> str:
    """The expression of ``x`` an op layer computes; ``module``: the attribute holding a module-form layer."""
    form, target, args, kwargs = params["form"], params["target"], params["args"], params["kwargs"]
    if form == "function":
        call = f"{target}({_arguments(args, kwargs)})"
    elif form == "method":
        call = f"{render(args[0])}.{target}({_arguments(args[1:], kwargs)})"
    elif form == "inplace":  # on a fresh copy: the adapted input is saved by tanh's backward
        call = f"{render(args[0])}.clone().{target}({_arguments(args[1:], kwargs)})"
    else:
        call = f"{module}({_arguments(args, {})})"
    return f"fold({call}, x)"


def tensor_literals(value: Any) -> list[dict[str, Any]]:
    """The encoded tensor arguments (adapted or spread, `render`) in ``value``, nested tuples and lists included."""
    if isinstance(value, dict):
        if "tensor" in value:
            return [value]
        return [t for item in value.get("tuple", ()) for t in tensor_literals(item)]
    if isinstance(value, list):
        return [t for item in value for t in tensor_literals(item)]
    return []


def plumbing_params(params: Mapping[str, Any]) -> dict[str, Any]:
    """The params of an op layer's plumbing twin: the op call's tensor arguments, in call order."""
    return {"args": tensor_literals([*params["args"], *params["kwargs"].values()])}


def plumbing_source(params: Mapping[str, Any]) -> str:
    """The expression of ``x`` an op layer computes with its op replaced by identity: its tensor arguments, adapted
    (or spread) as the op received them, folded back into ``x``'s shape (``x`` itself when the op took none)."""
    tensors = [render(t) for t in params["args"]]
    return f"fold(({', '.join(tensors)},), x)" if tensors else "fold(x, x)"


# The stand-ins' functions, the first one a layer is not: elementwise, smooth, saving their input for backward (as
# most ops save something: an identity saves nothing, so a memory failure would leave with it).
STAND_INS = ("sin", "cos")


def stand_in_source(params: Mapping[str, Any]) -> str:
    """The expression of ``x`` a stand-in layer computes: its function of each tensor argument the op it replaces
    received (adapted as the op received them), folded back into ``x``'s shape; of ``x`` where it replaces a layer
    kind (or an op that took no tensor)."""
    function = f"torch.{params['function']}"
    tensors = [f"{function}({render(t)})" for t in params["args"]]
    return f"fold(({', '.join(tensors)},), x)" if tensors else f"{function}(x)"


def module_source(params: Mapping[str, Any]) -> str:
    """The constructor of a module-form op layer (its keyword arguments are the call's non-tensor arguments)."""
    return f"{params['target']}({_arguments([], params['kwargs'])})"
