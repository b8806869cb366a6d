"""Each layer kind's own code: the sources of activations and functional kinds, and the fit, output and source
functions the registry's entries (`fuzz.generate.layers`) name."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

from fuzz.generate import ops
from fuzz.generate.kind import Incoming, LayerKind, Param

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
# Those whose output is not contiguous (`fuzz.generate.kind.LayerKind.strided`): their layout is their point.
STRIDED_FUNCTIONS = ("transpose_contiguous", "permute_contiguous")


def out_features_param(params: Mapping[str, Any], width: int) -> int:
    return params["out_features"]


def fixed_source(source: str) -> Callable[[Mapping[str, Any], int], str]:
    return lambda params, width: source.format(**params)


OUT = Param("out_features", "dim")


HIDDEN = Param("hidden", "dim")


ACTIVATION = Param("activation", "choice", tuple(ACTIVATIONS))


FUNCTION_PARAMS = {
    "fold_transpose": (Param("groups", "divisor"),),
    "chunk_swap": (Param("chunks", "dim"),),
    "split_swap": (Param("size", "dim"),),
    "roll_slices": (Param("offset", "offset"),),
    "narrow_swap": (Param("offset", "offset"),),
}


# An op layer: the op's OpInfo name, its call form, the torch callable, the call's literal arguments.
OP_PARAMS = (
    Param("op", "name"),
    Param("form", "choice", ops.FUNCTION_FORMS),
    Param("target", "name"),
    Param("args", "literal"),
    Param("kwargs", "literal"),
    # How the call differs from thunder's sample (`fuzz.generate.axes`): absent for the sample itself.
    Param("mutation", "literal", optional=True),
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


def conv_spatial(params: Mapping[str, Any], spatial: tuple[int, ...]) -> tuple[int, ...]:
    kernel, stride, dilation = params["kernel"], params["stride"], params["dilation"]
    if params["transposed"]:
        padding = int(params["padding"])
        return tuple((size - 1) * stride - 2 * padding + dilation * (kernel - 1) + 1 for size in spatial)
    if params["padding"] == "same":
        return spatial
    padding = int(params["padding"])
    return tuple((size + 2 * padding - dilation * (kernel - 1) - 1) // stride + 1 for size in spatial)


def fit_conv(params: Mapping[str, Any], incoming: Incoming) -> dict[str, Any]:
    """Groups dividing both channel counts; 'same' padding only where torch takes it; an output of 1 to
    `MAX_SPATIAL` per dim (else a 1-wide kernel, then stride 1); no dilation of a 1-wide kernel in CPU float16."""
    fitted = _with_shared_groups(params, incoming)
    if fitted["padding"] == "same" and (fitted["stride"] != 1 or fitted["transposed"]):
        fitted["padding"] = "0"
    for change in ({"kernel": 1, "padding": "0", "dilation": 1}, {"stride": 1}):
        sizes = conv_spatial(fitted, incoming.spatial)
        if min(sizes) >= 1 and max(sizes) <= MAX_SPATIAL:
            break
        fitted.update(change)
    if fitted["kernel"] == 1 and (incoming.dtype, incoming.device) == ("float16", "cpu"):
        # A dilation changes nothing at kernel 1, except that torch 2.9.1's CPU float16 convolution (oneDNN's
        # brgemm kernel) then segfaults: Conv2d(1, 48, 1, stride=2, padding=1, dilation=2) on a (1, 1, 4, 1) input.
        fitted["dilation"] = 1
    return fitted


def conv_source(params: Mapping[str, Any], width: int) -> str:
    padding = repr(params["padding"]) if params["padding"] == "same" else params["padding"]
    return (
        f"nn.Conv{'Transpose' if params['transposed'] else ''}{params['dims']}d({width}, {params['out_channels']}, "
        f"{params['kernel']}, stride={params['stride']}, padding={padding}, dilation={params['dilation']}, "
        f"groups={params['groups']}, bias={params['bias']})"
    )


POOLS = ("max", "avg", "adaptive_max", "adaptive_avg")


def fit_pool(params: Mapping[str, Any], incoming: Incoming) -> dict[str, Any]:
    """Adaptive pooling takes its output size from ``kernel`` and neither stride nor padding; the others a
    kernel no larger than the input and a padding of at most half the kernel (torch's rule), none where it
    would grow the image past `MAX_SPATIAL`. Max pooling where torch's CPU avg_pool3d has no kernel (float16,
    bfloat16)."""
    fitted = with_dims(params, incoming)
    if (fitted["pool"], fitted["dims"], incoming.device) == ("avg", 3, "cpu") and incoming.dtype in _HALF:
        fitted["pool"] = "max"
    if fitted["pool"].startswith("adaptive"):
        return {**fitted, "stride": 1, "padding": 0}
    kernel = min(fitted["kernel"], *incoming.spatial)
    fitted.update(kernel=kernel, padding=min(fitted["padding"], kernel // 2))
    if max(pool_spatial(fitted, incoming.spatial)) > MAX_SPATIAL:
        fitted["padding"] = 0
    return fitted


def pool_spatial(params: Mapping[str, Any], spatial: tuple[int, ...]) -> tuple[int, ...]:
    if params["pool"].startswith("adaptive"):
        return (params["kernel"],) * len(spatial)
    return tuple((size + 2 * params["padding"] - params["kernel"]) // params["stride"] + 1 for size in spatial)


def pool_source(params: Mapping[str, Any], width: int) -> str:
    call = f"F.{params['pool']}_pool{params['dims']}d"
    if params["pool"].startswith("adaptive"):
        return f"{call}(x, {params['kernel']})"
    return f"{call}(x, {params['kernel']}, {params['stride']}, {params['padding']})"


def fit_batch_norm(params: Mapping[str, Any], incoming: Incoming) -> dict[str, Any]:
    """Training mode needs more than one value per channel: else eval mode with running statistics."""
    fitted = with_dims(params, incoming)
    if incoming.batch * math.prod(incoming.spatial) == 1:
        fitted.update(eval=True, track_running_stats=True)
    return fitted


def _values_per_group(incoming: Incoming, channels: int, groups: int) -> int:
    return channels // groups * math.prod(incoming.spatial)


def fit_group_norm(params: Mapping[str, Any], incoming: Incoming) -> dict[str, Any]:
    """One group when groups of one value would be normalised (torch's training-mode rule)."""
    single = _values_per_group(incoming, incoming.width, params["groups"]) == 1
    return {**params, "groups": 1} if single else dict(params)


def norm_source(name: str) -> Callable[[Mapping[str, Any], int], str]:
    def source(params: Mapping[str, Any], width: int) -> str:
        module = (
            f"nn.{name}{params['dims']}d({width}, affine={params['affine']}, "
            f"track_running_stats={params['track_running_stats']})"
        )
        return f"{module}.eval()" if params.get("eval") else module

    return source


# Interpolation modes, by spatial rank for the linear family.
_LINEAR_MODES = {1: "linear", 2: "bilinear", 3: "trilinear"}


def upsample_source(params: Mapping[str, Any], width: int) -> str:
    mode = "nearest" if params["mode"] == "nearest" else _LINEAR_MODES[params["dims"]]
    return f"F.interpolate(x, scale_factor=2.0, mode={mode!r})"


def fit_pixel_shuffle(params: Mapping[str, Any], incoming: Incoming) -> dict[str, Any]:
    """The drawn direction where the input allows it, else the other one (`pixel_shufflable`)."""
    shuffle = _shufflable(incoming) if params["direction"] == "shuffle" else not _unshufflable(incoming)
    return {**params, "direction": "shuffle" if shuffle else "unshuffle"}


def _shufflable(incoming: Incoming) -> bool:
    """Channels to move into space (a multiple of 4) and room for the image to double."""
    return incoming.width % 4 == 0 and 2 * max(incoming.spatial) <= MAX_SPATIAL


def _unshufflable(incoming: Incoming) -> bool:
    return all(size % 2 == 0 for size in incoming.spatial)


def pixel_shufflable(incoming: Incoming) -> bool:
    """A 2-d image to shuffle (`_shufflable`) or with even sizes to unshuffle."""
    return len(incoming.spatial) == 2 and (_shufflable(incoming) or _unshufflable(incoming))


def _with_shared_groups(params: Mapping[str, Any], incoming: Incoming) -> dict[str, Any]:
    """``params`` with their ``dims`` and with groups dividing both channel counts (in and out)."""
    return {**with_dims(params, incoming), "groups": math.gcd(params["groups"], params["out_channels"])}


def with_dims(params: Mapping[str, Any], incoming: Incoming) -> dict[str, Any]:
    return {**params, "dims": len(incoming.spatial)}


def fit_conv_block(params: Mapping[str, Any], incoming: Incoming) -> dict[str, Any]:
    """Groups dividing both channel counts, with more than one value each (see `fit_group_norm`)."""
    fitted = _with_shared_groups(params, incoming)
    channels = (incoming.width, fitted["out_channels"])
    if min(_values_per_group(incoming, count, fitted["groups"]) for count in channels) == 1:
        fitted["groups"] = 1
    if math.prod(incoming.spatial) == 1:
        fitted["out_channels"] = max(fitted["out_channels"], 2)
    return fitted


def fit_unet_block(params: Mapping[str, Any], incoming: Incoming) -> dict[str, Any]:
    """A hidden width with more than one value per GroupNorm group after the stride-2 conv halves the image."""
    halved = math.prod((size + 1) // 2 for size in incoming.spatial)
    return {**with_dims(params, incoming), "hidden": max(params["hidden"], 2) if halved == 1 else params["hidden"]}


def more_than_one_value(incoming: Incoming) -> bool:
    return incoming.width * math.prod(incoming.spatial) > 1


DIMS = Param("dims", "int", high=3)


_HALF = ("float16", "bfloat16")


OUT_CHANNELS = Param("out_channels", "dim")


AFFINE = Param("affine", "flag")


TRACK = Param("track_running_stats", "flag")


VIEWS = ("select", "slice", "view", "transpose", "narrow", "diagonal", "unsqueeze")


UPDATES = ("add_", "mul_", "copy_", "relu_", "sin_")


VIEW_UPDATE_PARAMS = (
    Param("view", "choice", VIEWS),
    Param("update", "choice", UPDATES),
    Param("read", "choice", ("base", "view")),
)


def view_update_source(on: str | None) -> Callable[[Mapping[str, Any], int], str]:
    def source(params: Mapping[str, Any], width: int) -> str:
        args = ", ".join(repr(params[name]) for name in ("view", "update"))
        return f"ViewUpdate({args}, on={on or params['on']!r}, read={params['read']!r})"

    return source


VIEW_UPDATE_HELPERS = ("view_of", "update_in_place", "ViewUpdate")


def module_kind(
    name: str, source: Callable[[Mapping[str, Any], int], str], *params: Param, **options: Any
) -> LayerKind:
    return LayerKind(name, source, params, has_parameters=True, **options)
