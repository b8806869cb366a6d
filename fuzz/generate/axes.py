"""The argument axes of an op call: what a sample call's literals can vary beyond thunder's own samples.

A mutation is plain data: its ``axis``, its value ``class`` and the ``edits`` that make it, each replacing the
literal ``at`` a place of the call (``["args", i]`` or ``["kwargs", name]``) by ``value``, keeping the ``sample``
it replaced (an edit without one adds an argument the sample leaves out), so a mutated call goes back to its sample
exactly (`reverted`). `candidates` proposes them; the op
catalog keeps those that run eagerly (`fuzz.generate.op_catalog`). docs/op-axes.md is the taxonomy.
"""

from __future__ import annotations

import copy
import itertools
import json
import math
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from fuzz.generate.kind import is_int

# The axes, in the order a sweep and a shrink prefer them (the simplest change first).
AXES = ("flag", "choice", "dim", "dims", "scalar", "optional", "layout", "shape", "partner", "dtype")
LAYOUTS = ("transposed", "strided", "expanded", "channels last")
BATCH = 2  # the size of a batch dim put in front of an input
# Strings an argument takes from one set of modes: a sample's string is varied to the others of its set(s).
CHOICES = (
    ("mean", "sum", "none"),  # a loss's reduction
    ("none", "tanh"),  # gelu's approximate
    ("valid", "same"),  # a convolution's padding
    ("constant", "reflect", "replicate", "circular"),  # pad's mode
)
# A partner's dtype beside the network's (type promotion). Not bfloat16: eager rounds the gradient of a bfloat16
# partner to bfloat16, thunder need not, and a float32 network is judged at float32's tolerance (div with a bfloat16
# partner: one input-gradient element 1.8 % off, reported as a divergence) until the oracle judges each tensor at the
# lowest precision on its path.
PARTNER_DTYPES = ("float64",)
_MAX_DIM_LIST_RANK = 4  # dim lists of higher ranks: only their negative form (2**rank subsets is too many)
OUT_OF_RANGE = 99  # a dim no input has: eager must reject it as such for an integer to count as a dim


def _tensor(literal: Any) -> bool:
    return isinstance(literal, dict) and "tensor" in literal


def _int_list(literal: Any) -> list[int] | None:
    """The integers of a tuple or list literal of integers (a dim list, or sizes), else None."""
    items = literal.get("tuple") if isinstance(literal, dict) else literal if isinstance(literal, list) else None
    return items if items and all(is_int(item) for item in items) else None


def _like(literal: Any, items: list[int]) -> Any:
    """``items`` in the container ``literal`` is written in (a tuple or a list literal)."""
    return {"tuple": items} if isinstance(literal, dict) else items


def _places(args: list, kwargs: Mapping[str, Any]) -> Iterator[tuple[list, Any]]:
    yield from ((["args", i], a) for i, a in enumerate(args))
    yield from ((["kwargs", k], v) for k, v in kwargs.items())


def _edit(at: list, sample: Any, value: Any) -> dict[str, Any]:
    return {"at": at, "sample": sample, "value": value}


def _mutation(axis: str, value_class: str, *edits: dict[str, Any]) -> dict[str, Any]:
    return {"axis": axis, "class": value_class, "edits": list(edits)}


def laid_out(literal: dict[str, Any], layout: str) -> dict[str, Any] | None:
    """The tensor literal with ``layout`` (same shape, other strides: `fuzz.generate.ops.render`), or None where its
    shape has no such layout: transposed needs two dims not both of size 1, strided a dim, expanded a dim above 1,
    channels last (torch.channels_last or channels_last_3d) 4 or 5 dims with channels and a spatial size above 1 (else
    its strides are the contiguous ones)."""
    shape = literal["tensor"]
    possible = {
        "transposed": len(shape) >= 2 and not shape[-1] == shape[-2] == 1,
        "strided": bool(shape),
        "expanded": any(size > 1 for size in shape),
        "channels last": len(shape) in (4, 5) and shape[1] > 1 and math.prod(shape[2:]) > 1,
    }
    return {**literal, "layout": layout} if possible[layout] else None


def _layouts(axis: str, at: list, literal: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for layout in LAYOUTS:
        if (value := laid_out(literal, layout)) is not None:
            yield _mutation(axis, layout, _edit(at, literal, value))


def _shapes(axis: str, at: list, literal: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Its first dim above 1 set to 1 (a partner then broadcasts), its last dim grown by one (an odd size, a loop's
    tail), a batch dim in front, and 0-dim."""
    shape = literal["tensor"]
    if any(size > 1 for size in shape):
        index = next(i for i, size in enumerate(shape) if size > 1)
        yield _mutation(
            axis, "size 1", _edit(at, literal, {**literal, "tensor": [*shape[:index], 1, *shape[index + 1 :]]})
        )
    if shape:
        yield _mutation(axis, "grown", _edit(at, literal, {**literal, "tensor": [*shape[:-1], shape[-1] + 1]}))
    yield _mutation(axis, "batch dim", _edit(at, literal, {**literal, "tensor": [BATCH, *shape]}))
    if shape:
        yield _mutation(axis, "0-dim", _edit(at, literal, {**literal, "tensor": []}))


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


def _dim_lists(at: list, sample: Any, rank: int) -> Iterator[dict[str, Any]]:
    """Every other non-empty set of the receiver's dims (a class per set, in size order), the sample's dims written as
    negative ones, in its order, and its dims in another order: reversed, and rotated by one (where that differs)."""
    own = sorted({dim % rank for dim in _int_list(sample)})
    subsets = (
        itertools.chain.from_iterable(itertools.combinations(range(rank), k) for k in range(1, rank + 1))
        if rank <= _MAX_DIM_LIST_RANK
        else ()
    )
    for subset in subsets:
        if list(subset) != own:
            yield _mutation("dims", str(subset), _edit(at, sample, _like(sample, list(subset))))
    negative = [dim % rank - rank for dim in _int_list(sample)]  # (in the sample's order)
    if negative != _int_list(sample):
        yield _mutation("dims", "negative", _edit(at, sample, _like(sample, negative)))
    ordered = [dim % rank for dim in _int_list(sample)]
    if len(ordered) > 1:  # a permutation's order is the call (permute, movedim); a reduction's should not matter
        for value_class, order in (("reversed", ordered[::-1]), ("rotated", [*ordered[1:], ordered[0]])):
            if value_class == "reversed" or order != ordered[::-1]:  # of two dims, rotated is reversed
                yield _mutation("dims", value_class, _edit(at, sample, _like(sample, order)))


def _scalars(at: list, sample: float) -> Iterator[dict[str, Any]]:
    """Zero, the sample's sign flipped (-1 for zero) and a larger magnitude (an integer's by one, a float's ten times;
    10 for zero): slopes, alphas, eps, momentum, correction, sizes and counts alike."""
    larger = (sample + (1 if sample >= 0 else -1)) if is_int(sample) else (10 * sample if sample else 10.0)
    flipped = -sample if sample else type(sample)(-1)
    for value_class, value in (("zero", type(sample)(0)), ("sign flipped", flipped), ("larger", larger)):
        if value != sample:
            yield _mutation("scalar", value_class, _edit(at, sample, value))


def _choices(at: list, sample: str) -> Iterator[dict[str, Any]]:
    others = dict.fromkeys(mode for modes in CHOICES if sample in modes for mode in modes if mode != sample)
    yield from (_mutation("choice", mode, _edit(at, sample, mode)) for mode in others)


def _partner(at: list, literal: dict[str, Any], first: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """A tensor argument after the first: absent (None), laid out and shaped as the first can be (a size 1 then
    broadcasts), of the first's shape (a 0-dim or broadcast partner made full), and in another float dtype."""
    yield _mutation("optional", "absent", _edit(at, literal, None))
    yield from _layouts("partner", at, literal)
    yield from _shapes("partner", at, literal)
    if literal["tensor"] != first["tensor"]:
        yield _mutation("partner", "as the first", _edit(at, literal, {**literal, "tensor": first["tensor"]}))
    for dtype in PARTNER_DTYPES if literal.get("grad", True) else ():
        yield _mutation("dtype", dtype, _edit(at, literal, {**literal, "dtype": dtype}))


def tensors_passed(calls: Iterable[tuple[list, Mapping[str, Any]]]) -> dict[str, dict[str, Any]]:
    """Per place (JSON of ``["args", i]`` or ``["kwargs", name]``), the first tensor literal ``calls`` pass there."""
    passed: dict[str, dict[str, Any]] = {}
    for args, kwargs in calls:
        for at, literal in _places(args, kwargs):
            if _tensor(literal):
                passed.setdefault(json.dumps(at), literal)
    return passed


def _present(args: list, kwargs: Mapping[str, Any], elsewhere: Mapping[str, dict[str, Any]]) -> Iterator[dict]:
    """An optional tensor the call leaves out (None, a keyword not given, or the next positional argument) that another
    call of its op passes (``elsewhere``: JSON of the place -> that tensor literal), passed as there."""
    for place, literal in elsewhere.items():
        kind, key = json.loads(place)
        if kind == "args" and key == len(args) or kind == "kwargs" and key not in kwargs:
            # No sample there: `reverted` drops the argument again.
            yield _mutation("optional", "present", {"at": [kind, key], "value": literal})
        elif (kind == "kwargs" or key < len(args)) and (args if kind == "args" else kwargs)[key] is None:
            yield _mutation("optional", "present", _edit([kind, key], None, literal))


def candidates(
    args: list, kwargs: Mapping[str, Any], elsewhere: Mapping[str, dict[str, Any]] | None = None
) -> list[dict[str, Any]]:
    """Every mutation of a call's literals to try, in `AXES` order: flags flipped, strings to the other modes of
    their set, each dim and set of dims of the first tensor argument (for an integer, or a list of them, that may be
    a dim: `dim_probe` tells), other scalars, each layout and shape of the first tensor argument, each tensor
    argument after it absent, laid out, shaped and typed otherwise, and a tensor the call leaves out that another
    call of its op passes (``elsewhere``, see `_present`) present."""
    found: dict[str, list[dict[str, Any]]] = {axis: [] for axis in AXES}
    receivers = [(at, literal) for at, literal in _places(args, kwargs) if _tensor(literal)]
    receiver_at, receiver = receivers[0] if receivers else (None, None)
    rank = len(receiver["tensor"]) if receiver is not None else 0
    for at, literal in _places(args, kwargs):
        if isinstance(literal, bool):
            found["flag"].append(_mutation("flag", str(not literal).lower(), _edit(at, literal, not literal)))
        elif isinstance(literal, str):
            found["choice"] += _choices(at, literal)
        elif is_int(literal) or isinstance(literal, float):
            if is_int(literal) and receiver is not None and -rank <= literal < max(rank, 1):
                found["dim"] += _dims(at, literal, receiver_at, receiver)
            found["scalar"] += _scalars(at, literal)
        elif (items := _int_list(literal)) and rank and all(-rank <= item < rank for item in items):
            found["dims"] += _dim_lists(at, literal, rank)
    if receiver is not None:
        found["layout"] += _layouts("layout", receiver_at, receiver)
        found["shape"] += _shapes("shape", receiver_at, receiver)
    for at, literal in receivers[1:]:
        for mutation in _partner(at, literal, receiver):
            found[mutation["axis"]].append(mutation)
    found["optional"] += _present(args, kwargs, elsewhere or {})
    return [mutation for axis in AXES for mutation in found[axis]]


def dim_probe(at: list, sample: Any) -> dict[str, Any]:
    """The edit putting a dim far out of range at ``at`` (an integer, or a dim list's first, its length kept as a
    permutation needs): eager must reject it ("Dimension out of range") for the literal there to be a dim, not a
    size, a count or an index."""
    value = OUT_OF_RANGE if is_int(sample) else _like(sample, [OUT_OF_RANGE, *_int_list(sample)[1:]])
    return _mutation("dim", "out of range", _edit(at, sample, value))


def _at(params: dict[str, Any], at: list) -> tuple[Any, Any]:
    return params[at[0]], at[1]


def mutated(params: Mapping[str, Any], mutation: dict[str, Any]) -> dict[str, Any]:
    """An op layer's params with ``mutation`` applied, and recorded under ``mutation``."""
    result = copy.deepcopy(dict(params))
    for edit in mutation["edits"]:
        container, key = _at(result, edit["at"])
        if "sample" not in edit and isinstance(container, list) and key == len(container):  # one the sample leaves out
            container.append(None)
        container[key] = copy.deepcopy(edit["value"])
    return {**result, "mutation": mutation}


def reverted(params: Mapping[str, Any]) -> dict[str, Any]:
    """An op layer's params back at the sample call (without its ``mutation``)."""
    result = copy.deepcopy({k: v for k, v in params.items() if k != "mutation"})
    for edit in reversed(params.get("mutation", {}).get("edits", [])):
        container, key = _at(result, edit["at"])
        if "sample" in edit:
            container[key] = copy.deepcopy(edit["sample"])
        else:  # an argument the sample leaves out (`_present`): the last positional one, or a keyword
            del container[key]
    return result
