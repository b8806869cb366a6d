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
database's saved choices decode to other networks (tests/unit/test_strategies.py guards the order).
"""

from __future__ import annotations

import math

from fuzz.generate import ops
from fuzz.generate.catalog_flow import CATALOG_FLOW_KINDS
from fuzz.generate.flow import FLOW_KINDS, INDEXED_KINDS, INPUT_KINDS, VIEW_KINDS
from fuzz.generate.kind import LayerKind, Param
from fuzz.generate.layer_sources import (
    ACTIVATION,
    ACTIVATIONS,
    AFFINE,
    DIMS,
    FUNCTION_PARAMS,
    FUNCTIONS,
    HIDDEN,
    KV_HEADS,
    MAX_SPATIAL,
    OP_PARAMS,
    OUT,
    OUT_CHANNELS,
    POOLS,
    STRIDED_FUNCTIONS,
    TRACK,
    VIEW_UPDATE_HELPERS,
    VIEW_UPDATE_PARAMS,
    conv_source,
    conv_spatial,
    fit_batch_norm,
    fit_conv,
    fit_conv_block,
    fit_group_norm,
    fit_pixel_shuffle,
    fit_pool,
    fit_unet_block,
    fixed_source,
    module_kind,
    more_than_one_value,
    norm_source,
    out_features_param,
    pixel_shufflable,
    pool_source,
    pool_spatial,
    query_groups,
    upsample_source,
    view_update_source,
    with_dims,
)

LAYER_KINDS: dict[str, LayerKind] = {
    kind.name: kind
    for kind in (
        module_kind("linear", lambda p, d: f"nn.Linear({d}, {p['out_features']}, bias={p['bias']})", OUT,
                Param("bias", "flag"), out_features=out_features_param),
        *(LayerKind(name, fixed_source(source), layout="any") for name, source in ACTIVATIONS.items()),
        module_kind("layer_norm", lambda p, d: f"nn.LayerNorm({d}, elementwise_affine={p['elementwise_affine']})",
                Param("elementwise_affine", "flag"), parameters_flag="elementwise_affine"),
        module_kind("rms_norm", lambda p, d: f"RMSNorm({d})", helpers=("RMSNorm",)),
        module_kind("mlp", lambda p, d: f"nn.Sequential(nn.Linear({d}, {p['hidden']}), {ACTIVATIONS[p['activation']]}, "
                f"nn.Linear({p['hidden']}, {p['out_features']}))", HIDDEN, OUT, ACTIVATION,
                out_features=out_features_param),
        module_kind("residual", lambda p, d: f"Residual(nn.Linear({d}, {p['hidden']}), {ACTIVATIONS[p['activation']]}, "
                f"nn.Linear({p['hidden']}, {d}))", HIDDEN, ACTIVATION, helpers=("Residual",)),
        module_kind("swiglu", lambda p, d: f"SwiGLU({d}, {p['hidden']})", HIDDEN, helpers=("SwiGLU",)),
        LayerKind("dropout", fixed_source("nn.Dropout({p})"), (Param("p", "choice", ("0.5", "0.1")),), random=True,
                  layout="any"),
        module_kind("attention", lambda p, d: f"Attention({d}, heads={p['heads']}, causal={p['causal']})",
                Param("heads", "divisor"), Param("causal", "flag"), helpers=("Attention",)),
        module_kind("transformer_block", lambda p, d: f"TransformerBlock({d}, heads={p['heads']}, "
                f"hidden={p['hidden']}, causal={p['causal']})", Param("heads", "divisor"), HIDDEN,
                Param("causal", "flag"), helpers=("RMSNorm", "Attention", "SwiGLU", "TransformerBlock")),
        module_kind("matmul", lambda p, d: f"MatMul({d}, {p['out_features']})", OUT, out_features=out_features_param,
                helpers=("MatMul",)),
        LayerKind("gram", fixed_source("Gram()"), helpers=("Gram",)),
        module_kind("linear_relu_inplace", lambda p, d: f"nn.Sequential(nn.Linear({d}, {p['out_features']}), "
                "nn.ReLU(inplace=True))", OUT, out_features=out_features_param, inplace=True),
        module_kind("linear_silu_inplace", lambda p, d: f"nn.Sequential(nn.Linear({d}, {p['out_features']}), "
                "nn.SiLU(inplace=True))", OUT, out_features=out_features_param, inplace=True),
        module_kind("inplace_residual", lambda p, d: f"InplaceResidual({d})", helpers=("InplaceResidual",),
                    inplace=True),
        # Those without params keep any input's shape; the others fold the last dim by its width.
        *(LayerKind(name, fixed_source(source), FUNCTION_PARAMS.get(name, ()), functional=True,
                    layout="features" if name in FUNCTION_PARAMS else "any", strided=name in STRIDED_FUNCTIONS)
          for name, source in FUNCTIONS.items()),
        # One call of a torch op from thunder's OpInfo database (fuzz.generate.ops, fuzz.generate.op_catalog).
        # (`adapt` and `fold` take and give back any shape.)
        LayerKind("op", lambda p, d: ops.call_source(p), OP_PARAMS, functional=True, helpers=ops.HELPERS,
                  layout="any"),
        LayerKind("op_module", lambda p, d: ops.module_source(p), OP_PARAMS[:1] + OP_PARAMS[2:],
                  helpers=ops.HELPERS, apply=lambda p, module: ops.call_source({**p, "form": "module"}, module),
                  layout="any"),
        # litgpt's LLaMA block (see fuzz.generate.decoder): last, being the least simple kind.
        module_kind("decoder_block", lambda p, d: f"DecoderBlock({d}, heads={p['heads']}, "
                f"query_groups={query_groups(p['heads'], p['kv_heads'])}, hidden={p['hidden']})",
                Param("heads", "divisor"), Param("kv_heads", "choice", KV_HEADS), HIDDEN,
                helpers=("RMSNorm", "CausalSelfAttention", "SwiGLU", "DecoderBlock")),
        # Mutation: in-place updates through views (of a product, a clone, or the layer's own input) and
        # of a buffer under no_grad.
        LayerKind("view_update", view_update_source(None), (*VIEW_UPDATE_PARAMS[:2],
                  Param("on", "choice", ("product", "clone")), VIEW_UPDATE_PARAMS[2]),
                  helpers=VIEW_UPDATE_HELPERS, inplace=True, layout="any"),
        LayerKind("input_update", view_update_source("input"), VIEW_UPDATE_PARAMS, helpers=VIEW_UPDATE_HELPERS,
                  inplace=True, layout="any", mutates_input=True),
        LayerKind("buffer_update", fixed_source("BufferUpdate()"), helpers=("BufferUpdate",), inplace=True,
                  layout="any"),
        # Images (batch, channels, *spatial): convolution, pooling, normalisation, resampling, blocks.
        module_kind("conv", conv_source, OUT_CHANNELS, Param("kernel", "int", high=3), Param("stride", "int", high=2),
                Param("padding", "choice", ("0", "1", "same")), Param("dilation", "int", high=2),
                Param("groups", "divisor"), Param("bias", "flag"), Param("transposed", "flag"), DIMS,
                out_features=lambda p, d: p["out_channels"], layout="channels", out_spatial=conv_spatial,
                fit=fit_conv),
        LayerKind("pool", pool_source, (Param("pool", "choice", POOLS), Param("kernel", "int", high=3),
                  Param("stride", "int", high=2), Param("padding", "int", low=0, high=1), DIMS), functional=True,
                  layout="channels", out_spatial=pool_spatial, fit=fit_pool),
        module_kind("batch_norm", norm_source("BatchNorm"), AFFINE, TRACK, Param("eval", "flag"), DIMS,
                parameters_flag="affine", layout="channels", fit=fit_batch_norm),
        module_kind("group_norm", lambda p, d: f"nn.GroupNorm({p['groups']}, {d}, affine={p['affine']})",
                Param("groups", "divisor"), AFFINE, parameters_flag="affine", layout="channels", fit=fit_group_norm,
                accepts=more_than_one_value),
        module_kind("instance_norm", norm_source("InstanceNorm"), AFFINE, TRACK, DIMS, parameters_flag="affine",
                layout="channels", fit=with_dims, accepts=lambda i: math.prod(i.spatial) > 1),
        LayerKind("upsample", upsample_source, (Param("mode", "choice", ("nearest", "linear")), DIMS),
                  functional=True, layout="channels", out_spatial=lambda p, s: tuple(2 * size for size in s),
                  fit=with_dims, accepts=lambda i: 2 * max(i.spatial) <= MAX_SPATIAL),
        LayerKind("pixel_shuffle", lambda p, d: f"F.pixel_{p['direction']}(x, 2)",
                  (Param("direction", "choice", ("shuffle", "unshuffle")),), functional=True, layout="channels",
                  out_features=lambda p, d: d // 4 if p["direction"] == "shuffle" else d * 4,
                  out_spatial=lambda p, s: tuple(size * 2 if p["direction"] == "shuffle" else size // 2 for size in s),
                  fit=fit_pixel_shuffle, accepts=pixel_shufflable),
        LayerKind("channels_last", lambda p, d: "x.contiguous(memory_format=torch.channels_last"
                  f"{'_3d' if p['dims'] == 3 else ''})", (DIMS,), functional=True, layout="channels", fit=with_dims,
                  accepts=lambda i: len(i.spatial) >= 2, strided=True),
        module_kind("conv_block", lambda p, d: f"ConvBlock({p['dims']}, {d}, {p['out_channels']}, {p['groups']})",
                OUT_CHANNELS, Param("groups", "divisor"), DIMS, out_features=lambda p, d: p["out_channels"],
                helpers=("conv_class", "ConvBlock"), layout="channels", fit=fit_conv_block,
                accepts=more_than_one_value),
        module_kind("unet_block", lambda p, d: f"UNetBlock({p['dims']}, {d}, {p['hidden']})", HIDDEN, DIMS,
                helpers=("conv_class", "ConvBlock", "UNetBlock"), layout="channels", fit=fit_unet_block),
        # Never drawn: an op layer with its op replaced by identity (`fuzz.generate.ops.plumbing_params`), what
        # reduction tries before it blames an op.
        LayerKind("op_plumbing", lambda p, d: ops.plumbing_source(p), (Param("args", "literal"),), functional=True,
                  helpers=ops.HELPERS, layout="any", drawn=False),
        # Nodes of programs only (never drawn for a stack): copies, views, two-value arithmetic, in-place updates.
        *FLOW_KINDS,
        # Never drawn: a layer with its op (or its kind) replaced by another op of the same shape and arity
        # (`fuzz.generate.ops.stand_in_source`), what reduction tries before it blames that op or kind.
        LayerKind("stand_in", lambda p, d: ops.stand_in_source(p), (Param("args", "literal"),
                  Param("function", "choice", ops.STAND_INS)), functional=True, helpers=ops.HELPERS, layout="any",
                  drawn=False),
        # Program nodes again: torch's view ops, the op catalog's in-place calls as updates and their twins, indexed
        # updates and their twins, a program's further inputs.
        *VIEW_KINDS,
        *CATALOG_FLOW_KINDS,
        *INDEXED_KINDS,
        *INPUT_KINDS,
    )
}  # fmt: skip
