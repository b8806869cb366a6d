"""The data-flow kinds of programs (`fuzz.generate.program`): copies, views, arithmetic on two values, in-place updates.

Each is a functional `LayerKind` with a `Flow` saying what it does to the values it reads; its source is an
expression of ``x`` and ``y`` (the values it reads) and of ``scale``, the float a program passes to the checkpointed
regions that take one (0.5 elsewhere). Never drawn for a layer stack: they are nodes of programs only.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fuzz.generate.kind import Flow, Incoming, LayerKind, Param
from fuzz.generate.layer_sources import fixed_source


def _fit_slice(params: Mapping[str, Any], incoming: Incoming) -> Mapping[str, Any]:
    start = min(params["start"], incoming.width - 1)
    return {"start": start, "length": max(1, min(params["length"], incoming.width - start))}


def _slice_source(params: Mapping[str, Any], width: int) -> str:
    return f"x[:, {params['start']}:{params['start'] + params['length']}]"


def _flow_kind(name: str, source: str, flow: Flow, **options: Any) -> LayerKind:
    # An update is `inplace`: kept out of selective checkpointing, where eager rejects in-place updates.
    return LayerKind(
        name, fixed_source(source), functional=True, drawn=False, flow=flow, inplace=flow.updates, **options
    )


FLOW_KINDS = (
    _flow_kind("clone", "x.clone()", Flow(fresh=True)),
    _flow_kind("alias", "x.view_as(x)", Flow()),
    LayerKind(
        "slice",
        _slice_source,
        (Param("start", "offset"), Param("length", "dim")),
        out_features=lambda params, width: params["length"],
        functional=True,
        drawn=False,
        fit=_fit_slice,
        flow=Flow(),
    ),
    _flow_kind("transpose", "x.t()", Flow(), transposes=True),
    _flow_kind("add", "x + y", Flow(reads=2, fresh=True)),
    _flow_kind("mul", "x * y", Flow(reads=2, fresh=True, saves=True)),
    _flow_kind("scale", "x * scale", Flow(fresh=True)),
    _flow_kind("add_", "x.add_(y)", Flow(reads=2, updates=True, twin="add")),
    _flow_kind("mul_", "x.mul_(scale)", Flow(updates=True, twin="scale")),
    _flow_kind("sigmoid_", "x.sigmoid_()", Flow(updates=True, saves_value=True, twin="sigmoid")),
)
