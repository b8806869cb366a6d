"""The argument axes of an op call: what a sample call's literals can vary beyond thunder's own samples.

A mutation is plain data: its ``axis``, its value ``class`` and the ``edits`` that make it, each replacing the
literal ``at`` a place of the call (``["args", i]`` or ``["kwargs", name]``) by ``value``, keeping the ``sample``
it replaced, so a mutated call goes back to its sample exactly (`reverted`). `candidates` proposes them; the op
catalog keeps those that run eagerly (`fuzz.generate.op_catalog`). docs/op-axes.md is the taxonomy.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Mapping
from typing import Any

# The axes, in the order a sweep and a shrink prefer them (the simplest change first).
AXES = ("flag", "dim", "optional", "layout", "shape")
LAYOUTS = ("transposed", "strided", "expanded")
BATCH = 2  # the size of a batch dim put in front of an input


def _tensor(literal: Any) -> bool:
    return isinstance(literal, dict) and "tensor" in literal


def _places(args: list, kwargs: Mapping[str, Any]) -> Iterator[tuple[list, Any]]:
    yield from ((["args", i], a) for i, a in enumerate(args))
    yield from ((["kwargs", k], v) for k, v in kwargs.items())


def _edit(at: list, sample: Any, value: Any) -> dict[str, Any]:
    return {"at": at, "sample": sample, "value": value}


def _mutation(axis: str, value_class: str, *edits: dict[str, Any]) -> dict[str, Any]:
    return {"axis": axis, "class": value_class, "edits": list(edits)}


def laid_out(literal: dict[str, Any], layout: str) -> dict[str, Any] | None:
    """The tensor literal with ``layout`` (same shape, other strides: `fuzz.generate.ops.render`), or None where its
    shape has no such layout: transposed needs two dims not both of size 1, strided a dim, expanded a dim above 1."""
    shape = literal["tensor"]
    possible = {
        "transposed": len(shape) >= 2 and not shape[-1] == shape[-2] == 1,
        "strided": bool(shape),
        "expanded": any(size > 1 for size in shape),
    }
    return {**literal, "layout": layout} if possible[layout] else None


def _layouts(at: list, literal: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for layout in LAYOUTS:
        if (value := laid_out(literal, layout)) is not None:
            yield _mutation("layout", layout, _edit(at, literal, value))


def _shapes(at: list, literal: dict[str, Any]) -> Iterator[dict[str, Any]]:
    shape = literal["tensor"]
    if any(size > 1 for size in shape):
        index = next(i for i, size in enumerate(shape) if size > 1)
        yield _mutation(
            "shape", "size 1", _edit(at, literal, {**literal, "tensor": [*shape[:index], 1, *shape[index + 1 :]]})
        )
    yield _mutation("shape", "batch dim", _edit(at, literal, {**literal, "tensor": [BATCH, *shape]}))
    if shape:
        yield _mutation("shape", "0-dim", _edit(at, literal, {**literal, "tensor": []}))


def _dims(at: list, sample: int, receiver_at: list, receiver: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Every other dim of the receiver's rank (a class per dim, one for the negative ones), and every dim of its rank
    with a batch dim in front (that edit included; one class)."""
    rank = len(receiver["tensor"])
    for dim in [*range(rank), *range(-rank, 0)]:
        if dim % rank != sample % rank:  # (-1 is the last dim: the sample's own reduction)
            yield _mutation("dim", str(dim) if dim >= 0 else "negative", _edit(at, sample, dim))
    batched = _edit(receiver_at, receiver, {**receiver, "tensor": [BATCH, *receiver["tensor"]]})
    for dim in [*range(rank + 1), *range(-rank - 1, 0)]:
        yield _mutation("dim", "with a batch dim", batched, _edit(at, sample, dim))


def candidates(args: list, kwargs: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Every mutation of a call's literals to try, in `AXES` order: flags flipped, each dim of the first tensor
    argument (for an integer that may be a dim: `out_of_range_dim` tells), optional tensors absent, each layout and
    shape of the first tensor argument."""
    found: dict[str, list[dict[str, Any]]] = {axis: [] for axis in AXES}
    receivers = [(at, literal) for at, literal in _places(args, kwargs) if _tensor(literal)]
    receiver_at, receiver = receivers[0] if receivers else (None, None)
    for at, literal in _places(args, kwargs):
        if isinstance(literal, bool):
            found["flag"].append(_mutation("flag", str(not literal).lower(), _edit(at, literal, not literal)))
        elif (
            isinstance(literal, int)
            and receiver is not None
            and -len(receiver["tensor"]) <= literal < max(len(receiver["tensor"]), 1)
        ):
            found["dim"] += _dims(at, literal, receiver_at, receiver)
        elif _tensor(literal) and at[0] == "kwargs":
            found["optional"].append(_mutation("optional", "absent", _edit(at, literal, None)))
    if receiver is not None:
        found["layout"] += _layouts(receiver_at, receiver)
        found["shape"] += _shapes(receiver_at, receiver)
    return [mutation for axis in AXES for mutation in found[axis]]


def out_of_range_dim(mutation: dict[str, Any]) -> dict[str, Any]:
    """A dim mutation with its dim far out of range: eager must reject it ("Dimension out of range") for the
    integer to be a dim at all, not a size, a count or an index."""
    *shape_edits, dim_edit = mutation["edits"]
    return {**mutation, "edits": [*shape_edits, {**dim_edit, "value": 99}]}


def _at(params: dict[str, Any], at: list) -> tuple[Any, Any]:
    return params[at[0]], at[1]


def mutated(params: Mapping[str, Any], mutation: dict[str, Any]) -> dict[str, Any]:
    """An op layer's params with ``mutation`` applied, and recorded under ``mutation``."""
    result = copy.deepcopy(dict(params))
    for edit in mutation["edits"]:
        container, key = _at(result, edit["at"])
        container[key] = copy.deepcopy(edit["value"])
    return {**result, "mutation": mutation}


def reverted(params: Mapping[str, Any]) -> dict[str, Any]:
    """An op layer's params back at the sample call (without its ``mutation``)."""
    result = copy.deepcopy({k: v for k, v in params.items() if k != "mutation"})
    for edit in reversed(params.get("mutation", {}).get("edits", [])):
        container, key = _at(result, edit["at"])
        container[key] = copy.deepcopy(edit["sample"])
    return result
