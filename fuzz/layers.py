"""The layer vocabulary: one `LayerKind` per kind of layer a generated network can contain.

Each kind declares its parameters as plain domains (the strategies turn them into Hypothesis
strategies), how its output width follows from its input width, and the plain-torch source
expression that constructs it (the builder and the repro writer both use that expression).
Adding a layer kind is adding one entry here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from fuzz.blocks import Residual

FLOAT_DTYPES = ("float32", "float64")

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


@dataclass(frozen=True)
class Param:
    """One parameter of a layer kind.

    ``domain`` is ``"dim"`` (a width, 1..max_dim, shrinking toward 1), ``"flag"`` (a bool,
    shrinking toward False) or ``"choice"`` (one of ``choices``, shrinking toward the first).
    """

    name: str
    domain: str
    choices: tuple[str, ...] = ()

    def is_valid(self, value: Any) -> bool:
        if self.domain == "dim":
            return isinstance(value, int) and not isinstance(value, bool) and value >= 1
        if self.domain == "flag":
            return isinstance(value, bool)
        return value in self.choices


@dataclass(frozen=True)
class LayerKind:
    """A kind of layer: its parameters, its output width, and its construction source."""

    name: str
    constructor: Callable[[Mapping[str, Any], int], str]
    params: tuple[Param, ...] = ()
    out_features: Callable[[Mapping[str, Any], int], int] = field(default=lambda params, features: features)
    helpers: tuple[type, ...] = ()
    dtypes: tuple[str, ...] = FLOAT_DTYPES


def _linear(params: Mapping[str, Any], features: int) -> str:
    return f"nn.Linear({features}, {params['out_features']}, bias={params['bias']})"


def _mlp(params: Mapping[str, Any], features: int) -> str:
    hidden, out, act = params["hidden"], params["out_features"], ACTIVATIONS[params["activation"]]
    return f"nn.Sequential(nn.Linear({features}, {hidden}), {act}, nn.Linear({hidden}, {out}))"


def _residual(params: Mapping[str, Any], features: int) -> str:
    hidden, act = params["hidden"], ACTIVATIONS[params["activation"]]
    return f"Residual(nn.Linear({features}, {hidden}), {act}, nn.Linear({hidden}, {features}))"


def _out_features(params: Mapping[str, Any], features: int) -> int:
    return params["out_features"]


_ACTIVATION_CHOICE = Param("activation", "choice", tuple(ACTIVATIONS))

LAYER_KINDS: dict[str, LayerKind] = {
    kind.name: kind
    for kind in (
        LayerKind("linear", _linear, (Param("out_features", "dim"), Param("bias", "flag")), _out_features),
        *(LayerKind(name, lambda params, features, source=source: source) for name, source in ACTIVATIONS.items()),
        LayerKind(
            "layer_norm",
            lambda params, features: f"nn.LayerNorm({features}, elementwise_affine={params['elementwise_affine']})",
            (Param("elementwise_affine", "flag"),),
        ),
        LayerKind(
            "mlp",
            _mlp,
            (Param("hidden", "dim"), Param("out_features", "dim"), _ACTIVATION_CHOICE),
            _out_features,
        ),
        LayerKind("residual", _residual, (Param("hidden", "dim"), _ACTIVATION_CHOICE), helpers=(Residual,)),
    )
}
