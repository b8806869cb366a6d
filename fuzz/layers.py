"""The layer vocabulary: one `LayerKind` per kind of layer a generated network can contain.

Each kind declares its parameters as plain domains (the strategies turn them into Hypothesis
strategies), how its output width follows from its input width, and its plain-torch source:
a module constructor (called as ``self.layerN(x)``) or, for a functional kind, an expression
of ``x`` written inline in ``forward``. The builder and the repro writer both use that source.
A kind's ``layout`` says what it maps: a "features" kind ``(..., width)`` to ``(..., out_width)`` on
inputs of rank 2 or 3; a "channels" kind an image ``(batch, channels, *spatial)`` (1 to 3 spatial
dims) to another image; an "any" kind either, keeping its shape. Its ``fit`` makes drawn parameters
valid for what enters the layer, so any stack the strategies draw is a valid network. Adding a layer
kind is adding one entry here, at the end of `LAYER_KINDS`: the strategies draw a kind by its place among the
kinds that take the incoming shape, in registry order, so an entry inserted before others would make the example
database's saved choices decode to other networks (tests/test_strategies.py guards the order).
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from fuzz import ops

# Name -> constructor source, simplest first (shrinking prefers earlier entries).
ACTIVATIONS: dict[str, str] = {
    "relu": "nn.ReLU()",
    "tanh": "nn.Tanh()",
    "sigmoid": "nn.Sigmoid()",
    "gelu": "nn.GELU()",
    "gelu_tanh": "nn.GELU(approximate='tanh')",
    "silu": "nn.SiLU()",
    "elu": "nn.ELU()",
    "leaky_relu": "nn.LeakyReLU(0.1)",
    "softplus": "nn.Softplus()",
    "hardswish": "nn.Hardswish()",
    "hardtanh": "nn.Hardtanh()",
    "mish": "nn.Mish()",
    "selu": "nn.SELU()",
    "softsign": "nn.Softsign()",
    "logsigmoid": "nn.LogSigmoid()",
}

# Functional kinds: an expression of `x` (and of the kind's params, formatted in), simplest first.
FUNCTIONS: dict[str, str] = {
    "softmax": "torch.softmax(x, dim=-1)",
    "log_softmax": "torch.log_softmax(x, dim=-1)",
    "center": "x - x.mean(dim=-1, keepdim=True)",
    "sum_normalize": "x / (x.abs().sum(dim=-1, keepdim=True) + 1)",
    "sub_amax": "x - x.amax(dim=-1, keepdim=True)",
    "batch_center": "x - x.mean(dim=0, keepdim=True)",
    "masked_fill": "x.masked_fill(x > 0.5, 0.0)",
    "where": "torch.where(x > 0, x, 0.1 * x)",
    "sin": "torch.sin(x)",
    "gaussian": "torch.exp(-x * x)",
    "rsqrt": "x * torch.rsqrt(x * x + 1)",
    "soft_abs": "torch.sqrt(x * x + 1)",
    "abs": "x.abs()",
    "clamp": "x.clamp(-0.5, 0.5)",
    "transpose_contiguous": "x.transpose(0, -1).contiguous().transpose(0, -1)",
    # reversed(range(...)), not range(n - 1, -1, -1): dynamo 2.9 unpacks the latter as its constructor arguments.
    "permute_contiguous": "x.permute(*reversed(range(x.dim()))).contiguous().permute(*reversed(range(x.dim())))",
    "fold_transpose": "x.view(*x.shape[:-1], {groups}, -1).transpose(-1, -2).reshape(x.shape)",
    "chunk_swap": "torch.cat(x.chunk({chunks}, dim=-1)[::-1], dim=-1)",
    "split_swap": "torch.cat(torch.split(x, {size}, dim=-1)[::-1], dim=-1)",
    "roll_slices": "torch.cat([x[..., {offset}:], x[..., :{offset}]], dim=-1)",
    "narrow_swap": "torch.cat([x.narrow(-1, {offset}, x.shape[-1] - {offset}), x.narrow(-1, 0, {offset})], dim=-1)",
}


_DOTTED_NAME = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*")


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


@dataclass(frozen=True)
class Param:
    """One parameter of a layer kind, valid or not depending on the incoming width.

    ``domain``, each shrinking toward its simplest value:
    ``"dim"`` a width 1..max_dim; ``"divisor"`` a divisor of the incoming width;
    ``"offset"`` 0..width-1; ``"flag"`` a bool (False); ``"choice"`` one of ``choices`` (the first);
    ``"name"`` a dotted Python name; ``"literal"`` an encoded argument list or keyword mapping
    (`fuzz.ops.render`); ``"int"`` an integer ``low..high`` (``low``). The op family's names and
    literals are drawn from `fuzz.op_catalog`.
    """

    name: str
    domain: str
    choices: tuple[str, ...] = ()
    low: int = 1
    high: int = 1

    def is_valid(self, value: Any, width: int) -> bool:
        if self.domain == "dim":
            return _is_int(value) and value >= 1
        if self.domain == "divisor":
            return _is_int(value) and value >= 1 and width % value == 0
        if self.domain == "offset":
            return _is_int(value) and 0 <= value < width
        if self.domain == "flag":
            return isinstance(value, bool)
        if self.domain == "name":
            return isinstance(value, str) and bool(_DOTTED_NAME.fullmatch(value))
        if self.domain == "literal":
            return isinstance(value, list | dict)
        if self.domain == "int":
            return _is_int(value) and self.low <= value <= self.high
        return value in self.choices


@dataclass(frozen=True)
class Incoming:
    """What enters a layer: the batch size, the width (features, or an image's channels), for an
    image ``(batch, channels, *spatial)`` its spatial sizes (None for features), the network's dtype and device."""

    batch: int
    width: int
    spatial: tuple[int, ...] | None = None
    dtype: str = "float32"
    device: str = "cpu"


def _unchanged(params: Mapping[str, Any], incoming: Incoming) -> Mapping[str, Any]:
    return params


@dataclass(frozen=True)
class LayerKind:
    """A kind of layer: parameters, output width, source, and what it needs of the harness.

    ``source(params, width)`` is a module constructor, or for a ``functional`` kind an
    expression of ``x``. ``apply(params, module)``: the expression applying a module layer held
    in attribute ``module`` to ``x`` (default: ``module(x)``). ``has_parameters``: the module can
    have parameters (so it can be frozen); ``parameters_flag`` names the flag param that turns them on, if one does.
    ``inplace``: updates a tensor in place (activations, views of computed tensors, buffers): kept out of
    selective checkpointing, where eager rejects in-place updates of what the policy saves.
    ``helpers``: names of the `fuzz.blocks` classes and functions the source uses. ``random``: draws random numbers in
    training mode (eager and thunder draw different streams; the oracle compares such networks
    differently, see `fuzz.oracle`). ``layout``: "features", "channels" or "any" (module docstring).
    ``out_spatial(params, spatial)``: a "channels" kind's output spatial sizes. ``fit(params, incoming)``:
    the drawn ``params`` made valid for ``incoming`` (a spec is valid only where its params are fitted
    already). ``accepts(incoming)``: whether the kind can take that input at all. ``mutates_input``:
    may update its own input in place (see `fuzz.spec.validate` for where eager allows it). ``drawn``: the
    strategies draw it (not so a kind only reduction makes, `fuzz.reduce`).
    """

    name: str
    source: Callable[[Mapping[str, Any], int], str]
    params: tuple[Param, ...] = ()
    out_features: Callable[[Mapping[str, Any], int], int] = field(default=lambda params, width: width)
    helpers: tuple[str, ...] = ()
    functional: bool = False
    apply: Callable[[Mapping[str, Any], str], str] | None = None
    has_parameters: bool = False
    parameters_flag: str | None = None
    inplace: bool = False
    random: bool = False
    mutates_input: bool = False
    layout: str = "features"
    out_spatial: Callable[[Mapping[str, Any], tuple[int, ...]], tuple[int, ...]] = field(
        default=lambda params, spatial: spatial
    )
    fit: Callable[[Mapping[str, Any], Incoming], Mapping[str, Any]] = _unchanged
    accepts: Callable[[Incoming], bool] | None = None
    drawn: bool = True

    def output(self, params: Mapping[str, Any], incoming: Incoming) -> Incoming:
        """What a layer of this kind with ``params`` outputs for ``incoming``."""
        spatial = None if incoming.spatial is None else self.out_spatial(params, incoming.spatial)
        return dataclasses.replace(incoming, width=self.out_features(params, incoming.width), spatial=spatial)

    def takes(self, incoming: Incoming) -> bool:
        """Whether a layer of this kind can take ``incoming`` (its layout, then its own ``accepts``)."""
        image = incoming.spatial is not None
        if self.layout != "any" and (self.layout == "channels") != image:
            return False
        return self.accepts is None or self.accepts(incoming)

    def trainable(self, params: Mapping[str, Any]) -> bool:
        """Whether a layer of this kind with ``params`` has parameters."""
        return self.has_parameters and (self.parameters_flag is None or bool(params[self.parameters_flag]))


def _out_features(params: Mapping[str, Any], width: int) -> int:
    return params["out_features"]


def _fixed(source: str) -> Callable[[Mapping[str, Any], int], str]:
    return lambda params, width: source.format(**params)


_OUT, _HIDDEN = Param("out_features", "dim"), Param("hidden", "dim")
_ACTIVATION = Param("activation", "choice", tuple(ACTIVATIONS))
_FUNCTION_PARAMS = {
    "fold_transpose": (Param("groups", "divisor"),),
    "chunk_swap": (Param("chunks", "dim"),),
    "split_swap": (Param("size", "dim"),),
    "roll_slices": (Param("offset", "offset"),),
    "narrow_swap": (Param("offset", "offset"),),
}


# An op layer: the op's OpInfo name, its call form, the torch callable, the call's literal arguments.
_OP_PARAMS = (
    Param("op", "name"),
    Param("form", "choice", ops.FUNCTION_FORMS),
    Param("target", "name"),
    Param("args", "literal"),
    Param("kwargs", "literal"),
)

# Key/value heads of a decoder block, simplest first: one per query head (MHA), grouped (GQA: half
# as many, or one when the head count is odd), a single one (MQA).
KV_HEADS = ("mha", "gqa", "mqa")


def query_groups(heads: int, kv_heads: str) -> int:
    """litgpt's ``n_query_groups`` for ``heads`` attention heads and a `KV_HEADS` choice."""
    return {"mha": heads, "gqa": heads // 2 if heads % 2 == 0 else 1, "mqa": 1}[kv_heads]


# Largest spatial size a fitted layer outputs, for inputs no larger (upsampling, pixel shuffle, transposed
# convolutions and padded pooling grow images).
MAX_SPATIAL = 16


def _conv_spatial(params: Mapping[str, Any], spatial: tuple[int, ...]) -> tuple[int, ...]:
    kernel, stride, dilation = params["kernel"], params["stride"], params["dilation"]
    if params["transposed"]:
        padding = int(params["padding"])
        return tuple((size - 1) * stride - 2 * padding + dilation * (kernel - 1) + 1 for size in spatial)
    if params["padding"] == "same":
        return spatial
    padding = int(params["padding"])
    return tuple((size + 2 * padding - dilation * (kernel - 1) - 1) // stride + 1 for size in spatial)


def _fit_conv(params: Mapping[str, Any], incoming: Incoming) -> dict[str, Any]:
    """Groups dividing both channel counts; 'same' padding only where torch takes it; an output of 1 to
    `MAX_SPATIAL` per dim (else a 1-wide kernel, then stride 1); no dilation of a 1-wide kernel in CPU float16."""
    fitted = _with_shared_groups(params, incoming)
    if fitted["padding"] == "same" and (fitted["stride"] != 1 or fitted["transposed"]):
        fitted["padding"] = "0"
    for change in ({"kernel": 1, "padding": "0", "dilation": 1}, {"stride": 1}):
        sizes = _conv_spatial(fitted, incoming.spatial)
        if min(sizes) >= 1 and max(sizes) <= MAX_SPATIAL:
            break
        fitted.update(change)
    if fitted["kernel"] == 1 and (incoming.dtype, incoming.device) == ("float16", "cpu"):
        # A dilation changes nothing at kernel 1, except that torch 2.9.1's CPU float16 convolution (oneDNN's
        # brgemm kernel) then segfaults: Conv2d(1, 48, 1, stride=2, padding=1, dilation=2) on a (1, 1, 4, 1) input.
        fitted["dilation"] = 1
    return fitted


def _conv_source(params: Mapping[str, Any], width: int) -> str:
    padding = repr(params["padding"]) if params["padding"] == "same" else params["padding"]
    return (
        f"nn.Conv{'Transpose' if params['transposed'] else ''}{params['dims']}d({width}, {params['out_channels']}, "
        f"{params['kernel']}, stride={params['stride']}, padding={padding}, dilation={params['dilation']}, "
        f"groups={params['groups']}, bias={params['bias']})"
    )


POOLS = ("max", "avg", "adaptive_max", "adaptive_avg")


def _fit_pool(params: Mapping[str, Any], incoming: Incoming) -> dict[str, Any]:
    """Adaptive pooling takes its output size from ``kernel`` and neither stride nor padding; the others a
    kernel no larger than the input and a padding of at most half the kernel (torch's rule), none where it
    would grow the image past `MAX_SPATIAL`. Max pooling where torch's CPU avg_pool3d has no kernel (float16,
    bfloat16)."""
    fitted = _with_dims(params, incoming)
    if (fitted["pool"], fitted["dims"], incoming.device) == ("avg", 3, "cpu") and incoming.dtype in _HALF:
        fitted["pool"] = "max"
    if fitted["pool"].startswith("adaptive"):
        return {**fitted, "stride": 1, "padding": 0}
    kernel = min(fitted["kernel"], *incoming.spatial)
    fitted.update(kernel=kernel, padding=min(fitted["padding"], kernel // 2))
    if max(_pool_spatial(fitted, incoming.spatial)) > MAX_SPATIAL:
        fitted["padding"] = 0
    return fitted


def _pool_spatial(params: Mapping[str, Any], spatial: tuple[int, ...]) -> tuple[int, ...]:
    if params["pool"].startswith("adaptive"):
        return (params["kernel"],) * len(spatial)
    return tuple((size + 2 * params["padding"] - params["kernel"]) // params["stride"] + 1 for size in spatial)


def _pool_source(params: Mapping[str, Any], width: int) -> str:
    call = f"F.{params['pool']}_pool{params['dims']}d"
    if params["pool"].startswith("adaptive"):
        return f"{call}(x, {params['kernel']})"
    return f"{call}(x, {params['kernel']}, {params['stride']}, {params['padding']})"


def _fit_batch_norm(params: Mapping[str, Any], incoming: Incoming) -> dict[str, Any]:
    """Training mode needs more than one value per channel: else eval mode with running statistics."""
    fitted = _with_dims(params, incoming)
    if incoming.batch * math.prod(incoming.spatial) == 1:
        fitted.update(eval=True, track_running_stats=True)
    return fitted


def _values_per_group(incoming: Incoming, channels: int, groups: int) -> int:
    return channels // groups * math.prod(incoming.spatial)


def _fit_group_norm(params: Mapping[str, Any], incoming: Incoming) -> dict[str, Any]:
    """One group when groups of one value would be normalised (torch's training-mode rule)."""
    single = _values_per_group(incoming, incoming.width, params["groups"]) == 1
    return {**params, "groups": 1} if single else dict(params)


def _norm_source(name: str) -> Callable[[Mapping[str, Any], int], str]:
    def source(params: Mapping[str, Any], width: int) -> str:
        module = (
            f"nn.{name}{params['dims']}d({width}, affine={params['affine']}, "
            f"track_running_stats={params['track_running_stats']})"
        )
        return f"{module}.eval()" if params.get("eval") else module

    return source


# Interpolation modes, by spatial rank for the linear family.
_LINEAR_MODES = {1: "linear", 2: "bilinear", 3: "trilinear"}


def _upsample_source(params: Mapping[str, Any], width: int) -> str:
    mode = "nearest" if params["mode"] == "nearest" else _LINEAR_MODES[params["dims"]]
    return f"F.interpolate(x, scale_factor=2.0, mode={mode!r})"


def _fit_pixel_shuffle(params: Mapping[str, Any], incoming: Incoming) -> dict[str, Any]:
    """The drawn direction where the input allows it, else the other one (`_pixel_shufflable`)."""
    shuffle = _shufflable(incoming) if params["direction"] == "shuffle" else not _unshufflable(incoming)
    return {**params, "direction": "shuffle" if shuffle else "unshuffle"}


def _shufflable(incoming: Incoming) -> bool:
    """Channels to move into space (a multiple of 4) and room for the image to double."""
    return incoming.width % 4 == 0 and 2 * max(incoming.spatial) <= MAX_SPATIAL


def _unshufflable(incoming: Incoming) -> bool:
    return all(size % 2 == 0 for size in incoming.spatial)


def _pixel_shufflable(incoming: Incoming) -> bool:
    """A 2-d image to shuffle (`_shufflable`) or with even sizes to unshuffle."""
    return len(incoming.spatial) == 2 and (_shufflable(incoming) or _unshufflable(incoming))


def _with_shared_groups(params: Mapping[str, Any], incoming: Incoming) -> dict[str, Any]:
    """``params`` with their ``dims`` and with groups dividing both channel counts (in and out)."""
    return {**_with_dims(params, incoming), "groups": math.gcd(params["groups"], params["out_channels"])}


def _with_dims(params: Mapping[str, Any], incoming: Incoming) -> dict[str, Any]:
    return {**params, "dims": len(incoming.spatial)}


def _fit_conv_block(params: Mapping[str, Any], incoming: Incoming) -> dict[str, Any]:
    """Groups dividing both channel counts, with more than one value each (see `_fit_group_norm`)."""
    fitted = _with_shared_groups(params, incoming)
    channels = (incoming.width, fitted["out_channels"])
    if min(_values_per_group(incoming, count, fitted["groups"]) for count in channels) == 1:
        fitted["groups"] = 1
    if math.prod(incoming.spatial) == 1:
        fitted["out_channels"] = max(fitted["out_channels"], 2)
    return fitted


def _fit_unet_block(params: Mapping[str, Any], incoming: Incoming) -> dict[str, Any]:
    """A hidden width with more than one value per GroupNorm group after the stride-2 conv halves the image."""
    halved = math.prod((size + 1) // 2 for size in incoming.spatial)
    return {**_with_dims(params, incoming), "hidden": max(params["hidden"], 2) if halved == 1 else params["hidden"]}


def _more_than_one_value(incoming: Incoming) -> bool:
    return incoming.width * math.prod(incoming.spatial) > 1


_DIMS = Param("dims", "int", high=3)
_HALF = ("float16", "bfloat16")
_OUT_CHANNELS = Param("out_channels", "dim")
_AFFINE, _TRACK = Param("affine", "flag"), Param("track_running_stats", "flag")
VIEWS = ("select", "slice", "view", "transpose", "narrow", "diagonal", "unsqueeze")
UPDATES = ("add_", "mul_", "copy_", "relu_", "sin_")
_VIEW_UPDATE_PARAMS = (
    Param("view", "choice", VIEWS),
    Param("update", "choice", UPDATES),
    Param("read", "choice", ("base", "view")),
)


def _view_update_source(on: str | None) -> Callable[[Mapping[str, Any], int], str]:
    def source(params: Mapping[str, Any], width: int) -> str:
        args = ", ".join(repr(params[name]) for name in ("view", "update"))
        return f"ViewUpdate({args}, on={on or params['on']!r}, read={params['read']!r})"

    return source


_VIEW_UPDATE_HELPERS = ("view_of", "update_in_place", "ViewUpdate")


def _module(name: str, source: Callable[[Mapping[str, Any], int], str], *params: Param, **options: Any) -> LayerKind:
    return LayerKind(name, source, params, has_parameters=True, **options)


LAYER_KINDS: dict[str, LayerKind] = {
    kind.name: kind
    for kind in (
        _module("linear", lambda p, d: f"nn.Linear({d}, {p['out_features']}, bias={p['bias']})", _OUT,
                Param("bias", "flag"), out_features=_out_features),
        *(LayerKind(name, _fixed(source), layout="any") for name, source in ACTIVATIONS.items()),
        _module("layer_norm", lambda p, d: f"nn.LayerNorm({d}, elementwise_affine={p['elementwise_affine']})",
                Param("elementwise_affine", "flag"), parameters_flag="elementwise_affine"),
        _module("rms_norm", lambda p, d: f"RMSNorm({d})", helpers=("RMSNorm",)),
        _module("mlp", lambda p, d: f"nn.Sequential(nn.Linear({d}, {p['hidden']}), {ACTIVATIONS[p['activation']]}, "
                f"nn.Linear({p['hidden']}, {p['out_features']}))", _HIDDEN, _OUT, _ACTIVATION,
                out_features=_out_features),
        _module("residual", lambda p, d: f"Residual(nn.Linear({d}, {p['hidden']}), {ACTIVATIONS[p['activation']]}, "
                f"nn.Linear({p['hidden']}, {d}))", _HIDDEN, _ACTIVATION, helpers=("Residual",)),
        _module("swiglu", lambda p, d: f"SwiGLU({d}, {p['hidden']})", _HIDDEN, helpers=("SwiGLU",)),
        LayerKind("dropout", _fixed("nn.Dropout({p})"), (Param("p", "choice", ("0.5", "0.1")),), random=True,
                  layout="any"),
        _module("attention", lambda p, d: f"Attention({d}, heads={p['heads']}, causal={p['causal']})",
                Param("heads", "divisor"), Param("causal", "flag"), helpers=("Attention",)),
        _module("transformer_block", lambda p, d: f"TransformerBlock({d}, heads={p['heads']}, hidden={p['hidden']}, "
                f"causal={p['causal']})", Param("heads", "divisor"), _HIDDEN, Param("causal", "flag"),
                helpers=("RMSNorm", "Attention", "SwiGLU", "TransformerBlock")),
        _module("matmul", lambda p, d: f"MatMul({d}, {p['out_features']})", _OUT, out_features=_out_features,
                helpers=("MatMul",)),
        LayerKind("gram", _fixed("Gram()"), helpers=("Gram",)),
        _module("linear_relu_inplace", lambda p, d: f"nn.Sequential(nn.Linear({d}, {p['out_features']}), "
                "nn.ReLU(inplace=True))", _OUT, out_features=_out_features, inplace=True),
        _module("linear_silu_inplace", lambda p, d: f"nn.Sequential(nn.Linear({d}, {p['out_features']}), "
                "nn.SiLU(inplace=True))", _OUT, out_features=_out_features, inplace=True),
        _module("inplace_residual", lambda p, d: f"InplaceResidual({d})", helpers=("InplaceResidual",), inplace=True),
        # Those without params keep any input's shape; the others fold the last dim by its width.
        *(LayerKind(name, _fixed(source), _FUNCTION_PARAMS.get(name, ()), functional=True,
                    layout="features" if name in _FUNCTION_PARAMS else "any") for name, source in FUNCTIONS.items()),
        # One call of a torch op from thunder's OpInfo database (fuzz.ops, fuzz.op_catalog).
        # (`adapt` and `fold` take and give back any shape.)
        LayerKind("op", lambda p, d: ops.call_source(p), _OP_PARAMS, functional=True, helpers=ops.HELPERS,
                  layout="any"),
        LayerKind("op_module", lambda p, d: ops.module_source(p), _OP_PARAMS[:1] + _OP_PARAMS[2:],
                  helpers=ops.HELPERS, apply=lambda p, module: ops.call_source({**p, "form": "module"}, module),
                  layout="any"),
        # litgpt's LLaMA block (see fuzz.decoder): last, being the least simple kind.
        _module("decoder_block", lambda p, d: f"DecoderBlock({d}, heads={p['heads']}, "
                f"query_groups={query_groups(p['heads'], p['kv_heads'])}, hidden={p['hidden']})",
                Param("heads", "divisor"), Param("kv_heads", "choice", KV_HEADS), _HIDDEN,
                helpers=("RMSNorm", "CausalSelfAttention", "SwiGLU", "DecoderBlock")),
        # Mutation: in-place updates through views (of a product, a clone, or the layer's own input) and
        # of a buffer under no_grad.
        LayerKind("view_update", _view_update_source(None), (*_VIEW_UPDATE_PARAMS[:2],
                  Param("on", "choice", ("product", "clone")), _VIEW_UPDATE_PARAMS[2]),
                  helpers=_VIEW_UPDATE_HELPERS, inplace=True, layout="any"),
        LayerKind("input_update", _view_update_source("input"), _VIEW_UPDATE_PARAMS, helpers=_VIEW_UPDATE_HELPERS,
                  inplace=True, layout="any", mutates_input=True),
        LayerKind("buffer_update", _fixed("BufferUpdate()"), helpers=("BufferUpdate",), inplace=True, layout="any"),
        # Images (batch, channels, *spatial): convolution, pooling, normalisation, resampling, blocks.
        _module("conv", _conv_source, _OUT_CHANNELS, Param("kernel", "int", high=3), Param("stride", "int", high=2),
                Param("padding", "choice", ("0", "1", "same")), Param("dilation", "int", high=2),
                Param("groups", "divisor"), Param("bias", "flag"), Param("transposed", "flag"), _DIMS,
                out_features=lambda p, d: p["out_channels"], layout="channels", out_spatial=_conv_spatial,
                fit=_fit_conv),
        LayerKind("pool", _pool_source, (Param("pool", "choice", POOLS), Param("kernel", "int", high=3),
                  Param("stride", "int", high=2), Param("padding", "int", low=0, high=1), _DIMS), functional=True,
                  layout="channels", out_spatial=_pool_spatial, fit=_fit_pool),
        _module("batch_norm", _norm_source("BatchNorm"), _AFFINE, _TRACK, Param("eval", "flag"), _DIMS,
                parameters_flag="affine", layout="channels", fit=_fit_batch_norm),
        _module("group_norm", lambda p, d: f"nn.GroupNorm({p['groups']}, {d}, affine={p['affine']})",
                Param("groups", "divisor"), _AFFINE, parameters_flag="affine", layout="channels", fit=_fit_group_norm,
                accepts=_more_than_one_value),
        _module("instance_norm", _norm_source("InstanceNorm"), _AFFINE, _TRACK, _DIMS, parameters_flag="affine",
                layout="channels", fit=_with_dims, accepts=lambda i: math.prod(i.spatial) > 1),
        LayerKind("upsample", _upsample_source, (Param("mode", "choice", ("nearest", "linear")), _DIMS),
                  functional=True, layout="channels", out_spatial=lambda p, s: tuple(2 * size for size in s),
                  fit=_with_dims, accepts=lambda i: 2 * max(i.spatial) <= MAX_SPATIAL),
        LayerKind("pixel_shuffle", lambda p, d: f"F.pixel_{p['direction']}(x, 2)",
                  (Param("direction", "choice", ("shuffle", "unshuffle")),), functional=True, layout="channels",
                  out_features=lambda p, d: d // 4 if p["direction"] == "shuffle" else d * 4,
                  out_spatial=lambda p, s: tuple(size * 2 if p["direction"] == "shuffle" else size // 2 for size in s),
                  fit=_fit_pixel_shuffle, accepts=_pixel_shufflable),
        LayerKind("channels_last", lambda p, d: "x.contiguous(memory_format=torch.channels_last"
                  f"{'_3d' if p['dims'] == 3 else ''})", (_DIMS,), functional=True, layout="channels", fit=_with_dims,
                  accepts=lambda i: len(i.spatial) >= 2),
        _module("conv_block", lambda p, d: f"ConvBlock({p['dims']}, {d}, {p['out_channels']}, {p['groups']})",
                _OUT_CHANNELS, Param("groups", "divisor"), _DIMS, out_features=lambda p, d: p["out_channels"],
                helpers=("conv_class", "ConvBlock"), layout="channels", fit=_fit_conv_block,
                accepts=_more_than_one_value),
        _module("unet_block", lambda p, d: f"UNetBlock({p['dims']}, {d}, {p['hidden']})", _HIDDEN, _DIMS,
                helpers=("conv_class", "ConvBlock", "UNetBlock"), layout="channels", fit=_fit_unet_block),
        # Never drawn: an op layer with its op replaced by identity (`fuzz.ops.plumbing_params`), what reduction
        # tries before it blames an op.
        LayerKind("op_plumbing", lambda p, d: ops.plumbing_source(p), (Param("args", "literal"),), functional=True,
                  helpers=ops.HELPERS, layout="any", drawn=False),
    )
}  # fmt: skip
