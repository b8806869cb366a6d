"""The data-flow kinds of programs (`fuzz.generate.program`): copies, views, arithmetic on two values, in-place updates.

Each is a functional `LayerKind` with a `Flow` saying what it does to the values it reads; its source is an
expression of ``x`` and ``y`` (the values it reads) and of ``scale``, the float a program passes to the checkpointed
regions that take one (0.5 elsewhere). Never drawn for a layer stack: they are nodes of programs only.

`VIEW_KINDS`: torch's view ops (`view`, `reshape`, `narrow`, `select`, `diagonal`, `expand`, `permute`, `unflatten`,
`split`, `chunk`, `as_strided`, and `detach`: a view that needs no grad), each written to give a matrix again (a
`select` unsqueezed, an `unflatten`'s first column), so a view of a program's value is a value like any other. The
op catalog's in-place calls are `fuzz.generate.catalog_flow`'s.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Any

from fuzz.generate.kind import Flow, Incoming, LayerKind, Param
from fuzz.generate.layer_sources import fixed_source

# An index or start drawn up to this, then fitted to the size it indexes (shrinks to 0).
_MAX_INDEX = 63


def _fit_slice(params: Mapping[str, Any], incoming: Incoming) -> Mapping[str, Any]:
    start = min(params["start"], incoming.width - 1)
    return {"start": start, "length": max(1, min(params["length"], incoming.width - start))}


def _slice_source(params: Mapping[str, Any], width: int) -> str:
    return f"x[:, {params['start']}:{params['start'] + params['length']}]"


def _rows_and_width(incoming: Incoming, rows: int, width: int) -> Incoming:
    return dataclasses.replace(incoming, batch=rows, width=width)


def _divisor_at_most(number: int, wanted: int) -> int:
    return max(d for d in range(1, min(number, wanted) + 1) if number % d == 0)


def _fit_columns(params: Mapping[str, Any], incoming: Incoming) -> Mapping[str, Any]:
    return {"cols": _divisor_at_most(incoming.batch * incoming.width, params["cols"])}


def _dim_size(params: Mapping[str, Any], incoming: Incoming) -> int:
    return incoming.batch if params["dim"] == 0 else incoming.width


def _fit_narrow(params: Mapping[str, Any], incoming: Incoming) -> Mapping[str, Any]:
    size = _dim_size(params, incoming)
    start = min(params["start"], size - 1)
    return {"dim": params["dim"], "start": start, "length": max(1, min(params["length"], size - start))}


def _narrowed(params: Mapping[str, Any], incoming: Incoming) -> Incoming:
    if params["dim"] == 0:
        return _rows_and_width(incoming, params["length"], incoming.width)
    return _rows_and_width(incoming, incoming.batch, params["length"])


def _fit_split(params: Mapping[str, Any], incoming: Incoming) -> Mapping[str, Any]:
    size = min(params["size"], incoming.width)
    return {"size": size, "index": min(params["index"], math.ceil(incoming.width / size) - 1)}


def _fit_chunk(params: Mapping[str, Any], incoming: Incoming) -> Mapping[str, Any]:
    chunks = min(params["chunks"], incoming.batch)
    rows = math.ceil(incoming.batch / chunks)  # torch's chunk: pieces of ceil(n / chunks), the last one shorter
    return {"chunks": chunks, "index": min(params["index"], math.ceil(incoming.batch / rows) - 1)}


def _chunk_rows(params: Mapping[str, Any], incoming: Incoming) -> int:
    rows = math.ceil(incoming.batch / params["chunks"])
    return min(rows, incoming.batch - params["index"] * rows)


def _view_kind(
    name: str,
    source: Any,
    params: tuple[Param, ...],
    reshapes: Any,
    fit: Any = None,
    contiguous: Any = None,
    **flow: Any,
) -> LayerKind:
    """A view op as a program node: ``source(params, width)``, ``reshapes(params, incoming)`` its matrix."""
    options = {} if fit is None else {"fit": fit}
    return LayerKind(
        name,
        source,
        params,
        functional=True,
        drawn=False,
        reshapes=reshapes,
        flow=Flow(contiguous=contiguous, **flow),
        **options,
    )


_DIM = Param("dim", "int", low=0, high=1)
_INDEX = Param("index", "int", low=0, high=_MAX_INDEX)

VIEW_KINDS = (
    _view_kind(
        "view",
        lambda p, w: f"x.view(-1, {p['cols']})",
        (Param("cols", "dim"),),
        lambda p, i: _rows_and_width(i, i.batch * i.width // p["cols"], p["cols"]),
        _fit_columns,
        needs_contiguous=True,
    ),
    _view_kind(
        "reshape",
        lambda p, w: f"x.reshape(-1, {p['cols']})",
        (Param("cols", "dim"),),
        lambda p, i: _rows_and_width(i, i.batch * i.width // p["cols"], p["cols"]),
        _fit_columns,
        needs_contiguous=True,  # (of a value that may not be, a copy: not a view)
    ),
    _view_kind(
        "narrow",
        lambda p, w: f"x.narrow({p['dim']}, {p['start']}, {p['length']})",
        (_DIM, Param("start", "int", low=0, high=_MAX_INDEX), Param("length", "dim")),
        _narrowed,
        _fit_narrow,
        lambda p, i: p["dim"] == 0 or p["length"] == i.width,
    ),
    _view_kind(
        "select",
        lambda p, w: f"x.select({p['dim']}, {p['index']}).unsqueeze({p['dim']})",
        (_DIM, _INDEX),
        lambda p, i: _rows_and_width(i, 1, i.width) if p["dim"] == 0 else _rows_and_width(i, i.batch, 1),
        lambda p, i: {"dim": p["dim"], "index": min(p["index"], _dim_size(p, i) - 1)},
        lambda p, i: p["dim"] == 0,
    ),
    _view_kind(
        "diagonal",
        lambda p, w: f"x.diagonal({p['offset']}).unsqueeze(0)",
        (Param("offset", "int", low=0, high=_MAX_INDEX),),
        lambda p, i: _rows_and_width(i, 1, min(i.batch, i.width - p["offset"])),
        lambda p, i: {"offset": min(p["offset"], i.width - 1)},
        lambda p, i: False,
    ),
    _view_kind(
        "expand",
        lambda p, w: f"x[:1].expand({p['rows']}, -1)",
        (Param("rows", "dim"),),
        lambda p, i: _rows_and_width(i, p["rows"], i.width),
        contiguous=lambda p, i: p["rows"] == 1,
        overlaps=True,
    ),
    _view_kind("permute", lambda p, w: "x.permute(1, 0)", (), lambda p, i: _rows_and_width(i, i.width, i.batch),
               contiguous=lambda p, i: False),
    _view_kind(
        "unflatten",
        lambda p, w: f"x.unflatten(1, ({p['parts']}, {w // p['parts']}))[:, :, 0]",
        (Param("parts", "divisor"),),
        lambda p, i: _rows_and_width(i, i.batch, p["parts"]),
        contiguous=lambda p, i: p["parts"] == i.width,
    ),
    _view_kind(
        "split",
        lambda p, w: f"x.split({p['size']}, dim=1)[{p['index']}]",
        (Param("size", "dim"), _INDEX),
        lambda p, i: _rows_and_width(i, i.batch, min(p["size"], i.width - p["index"] * p["size"])),
        _fit_split,
        lambda p, i: p["size"] >= i.width,
    ),
    _view_kind(
        "chunk",
        lambda p, w: f"x.chunk({p['chunks']}, dim=0)[{p['index']}]",
        (Param("chunks", "dim"), _INDEX),
        lambda p, i: _rows_and_width(i, _chunk_rows(p, i), i.width),
        _fit_chunk,
    ),
    _view_kind(
        "as_strided",
        lambda p, w: f"x.as_strided(({p['rows']}, {p['cols']}), ({w}, 1))",
        (Param("rows", "dim"), Param("cols", "dim")),
        lambda p, i: _rows_and_width(i, p["rows"], p["cols"]),
        lambda p, i: {"rows": min(p["rows"], i.batch), "cols": min(p["cols"], i.width)},
        lambda p, i: p["cols"] == i.width,
        needs_contiguous=True,
    ),
    _view_kind("detach", lambda p, w: "x.detach()", (), lambda p, i: i, detaches=True),
)  # fmt: skip


def _fit_rows(params: Mapping[str, Any], incoming: Incoming) -> Mapping[str, Any]:
    first = min(params["first"], incoming.batch - 1)
    return {**params, "first": first, "count": max(1, min(params["count"], incoming.batch - first))}


def _rows(params: Mapping[str, Any]) -> str:
    """The row indices an indexed update writes, as a list literal (distinct: eager's result with repeated indices
    and no accumulation is unspecified)."""
    return str(list(range(params["first"], params["first"] + params["count"])))


def _columns(params: Mapping[str, Any]) -> str:
    return f"{params['start']}:{params['start'] + params['length']}"


def _index_put(params: Mapping[str, Any], method: str) -> str:
    rows = _rows(params)
    return f"x.{method}((torch.tensor({rows}, device=x.device),), y[{rows}], accumulate={params['accumulate']})"


_ROWS = (Param("first", "int", low=0, high=_MAX_INDEX), Param("count", "dim"))
_COLUMNS = (Param("start", "offset"), Param("length", "dim"))


def _indexed_update(
    name: str, source: Any, params: tuple[Param, ...], fit: Any, twin: str | None = None, **flow: Any
) -> LayerKind:
    """An update of ``x`` from ``y`` by indexing, ``source(params)`` (a statement with ``statement``), that becomes its
    ``twin`` where eager rejects it; without a twin, that twin itself (a fresh value)."""
    return LayerKind(
        name,
        lambda p, w: source(p),
        params,
        functional=True,
        drawn=False,
        fit=fit,
        inplace=twin is not None,
        flow=Flow(reads=2, updates=twin is not None, twin=twin, **flow),
    )


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
        flow=Flow(contiguous=lambda params, incoming: params["length"] == incoming.width),
    ),
    _flow_kind("transpose", "x.t()", Flow(contiguous=lambda params, incoming: False), transposes=True),
    _flow_kind("add", "x + y", Flow(reads=2, fresh=True)),
    _flow_kind("mul", "x * y", Flow(reads=2, fresh=True, saves=True)),
    _flow_kind("scale", "x * scale", Flow(fresh=True)),
    _flow_kind("add_", "x.add_(y)", Flow(reads=2, updates=True, twin="add")),
    _flow_kind("mul_", "x.mul_(scale)", Flow(updates=True, twin="scale")),
    _flow_kind("sigmoid_", "x.sigmoid_()", Flow(updates=True, saves_value=True, twin="sigmoid")),
)


# Updates of a value from another of its shape by copy, indexed assignment (slices, a mask, index tensors),
# index_put_ and masked_fill_: what code writes into state (a cache, an input that needs no grad). Each with its
# out-of-place twin.
INDEXED_KINDS = (
    _flow_kind("copy_", "x.copy_(y)", Flow(reads=2, updates=True, twin="copied")),
    _flow_kind("copied", "y.clone()", Flow(reads=2, fresh=True)),
    _indexed_update("slice_assign", lambda p: f"x[:, {_columns(p)}] = y[:, {_columns(p)}]", _COLUMNS, _fit_slice,
                    "slice_assigned", statement=True),
    _indexed_update("slice_assigned", lambda p: f"torch.cat([x[:, :{p['start']}], y[:, {_columns(p)}], "
                    f"x[:, {p['start'] + p['length']}:]], 1)", _COLUMNS, _fit_slice, fresh=True),
    _flow_kind("mask_assign", "x[y > 0] = y[y > 0]", Flow(reads=2, updates=True, twin="mask_assigned",
                                                         statement=True)),
    _flow_kind("mask_assigned", "torch.where(y > 0, y, x)", Flow(reads=2, fresh=True)),
    _indexed_update("rows_assign", lambda p: f"x[{_rows(p)}] = y[{_rows(p)}]", _ROWS, _fit_rows, "rows_assigned",
                    statement=True),
    _indexed_update("rows_assigned", lambda p: _index_put({**p, "accumulate": False}, "index_put"), _ROWS,
                    _fit_rows, fresh=True),
    _indexed_update("index_put_", lambda p: _index_put(p, "index_put_"), (*_ROWS, Param("accumulate", "flag")),
                    _fit_rows, "index_put"),
    _indexed_update("index_put", lambda p: _index_put(p, "index_put"), (*_ROWS, Param("accumulate", "flag")),
                    _fit_rows, fresh=True),
    _flow_kind("masked_fill_", "x.masked_fill_(y > 0, scale)",
               Flow(reads=2, updates=True, twin="masked_fill", masks=True)),
    _flow_kind("masked_fill", "x.masked_fill(y > 0, scale)", Flow(reads=2, fresh=True, masks=True)),
)  # fmt: skip

# A program's inputs beyond its first (`fuzz.generate.program`): ``state_input``, a new (batch, width) argument that
# requires grad or not; ``input_view``, an argument that is a column slice of an earlier input's tensor (two
# arguments sharing memory, overlapping or not). Their source is the argument itself (`fuzz.generate.program_source`).
INPUT_KINDS = (
    _view_kind(
        "state_input",
        lambda p, w: "x",
        (Param("width", "dim"), Param("requires_grad", "flag")),
        lambda p, i: _rows_and_width(i, i.batch, p["width"]),
        fresh=True,
        input=True,
    ),
    _view_kind(
        "input_view",
        lambda p, w: "x",
        _COLUMNS,
        lambda p, i: _rows_and_width(i, i.batch, p["length"]),
        _fit_slice,
        lambda p, i: p["length"] == i.width,
        input=True,
    ),
)
