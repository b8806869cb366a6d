"""The layer vocabulary: one `LayerKind` per kind of layer a generated network can contain.

Each kind declares its parameters as plain domains (the strategies turn them into Hypothesis
strategies), how its output width follows from its input width, and its plain-torch source:
a module constructor (called as ``self.layerN(x)``) or, for a functional kind, an expression
of ``x`` written inline in ``forward``. The builder and the repro writer both use that source.
Every kind maps ``(..., width)`` to ``(..., out_width)`` on inputs of rank 2 or 3, so any stack
of kinds is a valid network. Adding a layer kind is adding one entry here.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from fuzz import ops
from fuzz.blocks import (
    Attention,
    CausalSelfAttention,
    DecoderBlock,
    Gram,
    InplaceResidual,
    MatMul,
    Residual,
    RMSNorm,
    SwiGLU,
    TransformerBlock,
)

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
    (`fuzz.ops.render`). The op family's names and literals are drawn from `fuzz.op_catalog`.
    """

    name: str
    domain: str
    choices: tuple[str, ...] = ()

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
        return value in self.choices


@dataclass(frozen=True)
class LayerKind:
    """A kind of layer: parameters, output width, source, and what it needs of the harness.

    ``source(params, width)`` is a module constructor, or for a ``functional`` kind an
    expression of ``x``. ``apply(params, module)``: the expression applying a module layer held
    in attribute ``module`` to ``x`` (default: ``module(x)``). ``has_parameters``: the module can
    have parameters (so it can be frozen); ``parameters_flag`` names the flag param that turns them on, if one does.
    ``inplace``: mutates a saved tensor in place (eager rejects that under selective checkpointing).
    ``helpers``: classes of `fuzz.blocks` the source uses. ``random``: draws random numbers in
    training mode (eager and thunder draw different streams; the oracle compares such networks
    differently, see `fuzz.oracle`).
    """

    name: str
    source: Callable[[Mapping[str, Any], int], str]
    params: tuple[Param, ...] = ()
    out_features: Callable[[Mapping[str, Any], int], int] = field(default=lambda params, width: width)
    helpers: tuple[Callable, ...] = ()
    functional: bool = False
    apply: Callable[[Mapping[str, Any], str], str] | None = None
    has_parameters: bool = False
    parameters_flag: str | None = None
    inplace: bool = False
    random: bool = False

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


def _module(name: str, source: Callable[[Mapping[str, Any], int], str], *params: Param, **options: Any) -> LayerKind:
    return LayerKind(name, source, params, has_parameters=True, **options)


LAYER_KINDS: dict[str, LayerKind] = {
    kind.name: kind
    for kind in (
        _module("linear", lambda p, d: f"nn.Linear({d}, {p['out_features']}, bias={p['bias']})", _OUT,
                Param("bias", "flag"), out_features=_out_features),
        *(LayerKind(name, _fixed(source)) for name, source in ACTIVATIONS.items()),
        _module("layer_norm", lambda p, d: f"nn.LayerNorm({d}, elementwise_affine={p['elementwise_affine']})",
                Param("elementwise_affine", "flag"), parameters_flag="elementwise_affine"),
        _module("rms_norm", lambda p, d: f"RMSNorm({d})", helpers=(RMSNorm,)),
        _module("mlp", lambda p, d: f"nn.Sequential(nn.Linear({d}, {p['hidden']}), {ACTIVATIONS[p['activation']]}, "
                f"nn.Linear({p['hidden']}, {p['out_features']}))", _HIDDEN, _OUT, _ACTIVATION,
                out_features=_out_features),
        _module("residual", lambda p, d: f"Residual(nn.Linear({d}, {p['hidden']}), {ACTIVATIONS[p['activation']]}, "
                f"nn.Linear({p['hidden']}, {d}))", _HIDDEN, _ACTIVATION, helpers=(Residual,)),
        _module("swiglu", lambda p, d: f"SwiGLU({d}, {p['hidden']})", _HIDDEN, helpers=(SwiGLU,)),
        LayerKind("dropout", _fixed("nn.Dropout({p})"), (Param("p", "choice", ("0.5", "0.1")),), random=True),
        _module("attention", lambda p, d: f"Attention({d}, heads={p['heads']}, causal={p['causal']})",
                Param("heads", "divisor"), Param("causal", "flag"), helpers=(Attention,)),
        _module("transformer_block", lambda p, d: f"TransformerBlock({d}, heads={p['heads']}, hidden={p['hidden']}, "
                f"causal={p['causal']})", Param("heads", "divisor"), _HIDDEN, Param("causal", "flag"),
                helpers=(RMSNorm, Attention, SwiGLU, TransformerBlock)),
        _module("matmul", lambda p, d: f"MatMul({d}, {p['out_features']})", _OUT, out_features=_out_features,
                helpers=(MatMul,)),
        LayerKind("gram", _fixed("Gram()"), helpers=(Gram,)),
        _module("linear_relu_inplace", lambda p, d: f"nn.Sequential(nn.Linear({d}, {p['out_features']}), "
                "nn.ReLU(inplace=True))", _OUT, out_features=_out_features, inplace=True),
        _module("linear_silu_inplace", lambda p, d: f"nn.Sequential(nn.Linear({d}, {p['out_features']}), "
                "nn.SiLU(inplace=True))", _OUT, out_features=_out_features, inplace=True),
        _module("inplace_residual", lambda p, d: f"InplaceResidual({d})", helpers=(InplaceResidual,), inplace=True),
        *(LayerKind(name, _fixed(source), _FUNCTION_PARAMS.get(name, ()), functional=True)
          for name, source in FUNCTIONS.items()),
        # One call of a torch op from thunder's OpInfo database (fuzz.ops, fuzz.op_catalog).
        LayerKind("op", lambda p, d: ops.call_source(p), _OP_PARAMS, functional=True, helpers=ops.HELPERS),
        LayerKind("op_module", lambda p, d: ops.module_source(p), _OP_PARAMS[:1] + _OP_PARAMS[2:],
                  helpers=ops.HELPERS, apply=lambda p, module: ops.call_source({**p, "form": "module"}, module)),
        # litgpt's LLaMA block (see fuzz.decoder): last, being the least simple kind.
        _module("decoder_block", lambda p, d: f"DecoderBlock({d}, heads={p['heads']}, "
                f"query_groups={query_groups(p['heads'], p['kv_heads'])}, hidden={p['hidden']})",
                Param("heads", "divisor"), Param("kv_heads", "choice", KV_HEADS), _HIDDEN,
                helpers=(RMSNorm, CausalSelfAttention, SwiGLU, DecoderBlock)),
    )
}  # fmt: skip
