"""The op catalog's in-place calls as program updates: ``v.op_(...)`` on a value of a program, and their out-of-place
twins.

An update call (`UpdateCall`) is one in-place call of `fuzz.generate.op_catalog` whose receiver can be any matrix:
its other arguments are literals, or one more float tensor, which a program passes as a second value (``y``, of
the receiver's shape: `x.add_(y)` as `add_` is, where the sample may broadcast one). A call is kept where it runs
eagerly on intermediate matrices of several shapes and values of either sign, forward and backward, finite, in the
dtypes it keeps, and so does its out-of-place method (the twin an update becomes where eager rejects an update).
Its argument axes are the catalog's, restricted to those that vary a literal (`_LITERAL_AXES`). Calls with index
tensors (``index_put_``, ``scatter_``, ``masked_fill_`` with a mask) index the sample's shape only, and calls whose
domain is not every real (``log_``, ``sqrt_``) would give eager non-finite values on a program's values: both are
left out, with their reason (`left_out`).
"""

from __future__ import annotations

import hashlib
import json
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from fuzz.cache import cache_root, write_atomically
from fuzz.generate import axes
from fuzz.generate.kind import Flow, LayerKind, Param
from fuzz.generate.ops import render
from fuzz.generate.spec_parts import DTYPES

# The axes of a call that vary a literal, not a tensor argument (the receiver and partner are program values).
_LITERAL_AXES = ("flag", "choice", "dim", "dims", "scalar")
# Shapes an update must run on: a program's values are matrices of any size.
_CHECK_SHAPES = ((3, 4), (1, 1), (4, 1), (1, 5))
_CHECK_SEEDS = (0, 1)


@dataclass(frozen=True)
class UpdateCall:
    """An in-place call of the catalog as a program update: ``args[0]`` (the receiver) is the updated value and
    ``args[partner]`` (None: none) the second value it reads; ``dtypes``: those it runs in eagerly."""

    op: str
    target: str
    args: list
    kwargs: dict
    partner: int | None
    dtypes: tuple[str, ...]
    mutations: tuple[dict, ...] = ()

    @property
    def kind(self) -> str:
        """The program node kind of this call."""
        return "update_op" if self.partner is None else "update_op2"

    @property
    def params(self) -> dict[str, Any]:
        return {"call": self.op, "target": self.target, "args": self.args, "kwargs": self.kwargs}


def _arguments(params: Mapping[str, Any]) -> str:
    """The call's arguments after its receiver: its literals, the float tensor among them as ``y``."""
    rendered = ["y" if isinstance(a, dict) and "tensor" in a else render(a) for a in params["args"][1:]]
    return ", ".join([*rendered, *(f"{k}={render(v)}" for k, v in params["kwargs"].items())])


def update_source(params: Mapping[str, Any], width: int = 0) -> str:
    """``x.<op>_(...)``: the update of ``x`` (and ``y``) a node with ``params`` makes."""
    return f"x.{params['target']}({_arguments(params)})"


def twin_source(params: Mapping[str, Any], width: int = 0) -> str:
    """``x.<op>(...)``: the out-of-place twin of an update node."""
    return f"x.{params['target'].removesuffix('_')}({_arguments(params)})"


def _float_tensors(args: list, kwargs: Mapping[str, Any]) -> tuple[list[int], bool]:
    """The positions of the float tensor arguments, and whether a tensor sits elsewhere (keywords, nested, indices)."""
    positions = [i for i, a in enumerate(args) if isinstance(a, dict) and "tensor" in a]
    elsewhere = any(
        isinstance(v, dict) and ("tensor" in v or "values" in v or "tuple" in v)
        for v in [*kwargs.values(), *(a for i, a in enumerate(args) if i not in positions)]
    )
    return positions, elsewhere


def _shape_problem(args: list, kwargs: Mapping[str, Any]) -> str | None:
    positions, elsewhere = _float_tensors(args, kwargs)
    if elsewhere or positions[:1] != [0] or len(positions) > 2:
        return "takes index tensors, or more than one float tensor besides its receiver"
    return None


def as_function(source: str) -> Any:
    """An update's (or its twin's) source as a function of ``x`` (the updated value) and ``y`` (the second one)."""
    import torch

    return eval(f"lambda x, y: {source}", {"torch": torch})


def _runs_on_values(params: Mapping[str, Any], dtype: str, partner: bool) -> str | None:
    """None when update and twin run forward and backward on intermediate matrices of `_CHECK_SHAPES`, finite."""
    import torch

    for source in (update_source(params), twin_source(params)):
        for shape in _CHECK_SHAPES:
            for seed in _CHECK_SEEDS:
                generator = torch.Generator().manual_seed(seed)
                leaves = [(3 * torch.randn(shape, generator=generator)).to(getattr(torch, dtype)) for _ in range(2)]
                leaves = [leaf.requires_grad_() for leaf in leaves]
                try:
                    x, y = leaves[0] * 1, leaves[1] * 1  # intermediate values, as a program's are
                    result = as_function(source)(x, y)
                    result.backward(torch.ones_like(result))
                except Exception as error:
                    return f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"[:160]
                used = leaves if partner else leaves[:1]
                if not (bool(torch.isfinite(result).all()) and all(bool(torch.isfinite(t.grad).all()) for t in used)):
                    return "non-finite on values of either sign"
    return None


def _update_call(call: Any) -> UpdateCall | str:
    """The catalog call ``call`` (its in-place form) as an update, or why it is left out."""
    import torch

    if (problem := _shape_problem(call.args, call.kwargs)) is not None:
        return problem
    if not hasattr(torch.Tensor, call.target.removesuffix("_")):
        return "has no out-of-place method"
    partner = next((i for i, a in enumerate(call.args[1:], 1) if isinstance(a, dict) and "tensor" in a), None)
    params = {"target": call.target, "args": call.args, "kwargs": call.kwargs}
    reasons = {dtype: _runs_on_values(params, dtype, partner is not None) for dtype in call.dtypes}
    dtypes = tuple(dtype for dtype in DTYPES if dtype in reasons and reasons[dtype] is None)
    if "float64" not in dtypes:  # the float64 reference run of every dtype needs it
        return next(reason for reason in reasons.values() if reason)
    mutations = tuple(
        mutation
        for mutation in call.mutations
        if mutation["axis"] in _LITERAL_AXES
        and all(
            _runs_on_values(axes.mutated(params, mutation), dtype, partner is not None) is None
            for dtype in ("float32", "float64")
        )
    )
    return UpdateCall(call.op, call.target, call.args, call.kwargs, partner, dtypes, mutations)


def _keeps_some_values(call: UpdateCall) -> bool:
    """Whether ``call`` leaves some values of either sign as they were (``abs_`` the positive ones, ``ceil_`` the
    integers, ``clamp_`` those inside its bounds): such calls go last, so that a drawn update shrinks toward one that
    changes any value (a failure of updates then shows whatever values the layers before it make, and they go)."""
    import torch

    sample = ((torch.arange(12, dtype=torch.float64) - 5.5) * 0.47).reshape(3, 4)  # both signs, no integer, no zero
    x, y = sample.clone(), sample.flip(0, 1).clone()
    params = {"target": call.target, "args": call.args, "kwargs": call.kwargs}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = as_function(update_source(params))(x, y)
    return bool((result == sample).any())


def _checked(inplace: list[Any]) -> tuple[list[UpdateCall], dict[str, str]]:
    calls: list[UpdateCall] = []
    left: dict[str, str] = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for call in inplace:
            found = _update_call(call)
            if isinstance(found, str):
                left.setdefault(f"{call.target}#{call.variant}", found)
            else:
                calls.append(found)
    return calls, left


@cache
def _calls_and_left_out() -> tuple[tuple[UpdateCall, ...], dict[str, str]]:
    """Read from the cache (keyed by this module and the catalog's in-place calls), else checked (about 15 s) and
    cached, as the catalog is."""
    from fuzz.generate.op_catalog import catalog

    found = catalog()
    inplace = [call for call in found.calls if call.form == "inplace"]
    key = [Path(__file__).read_text(), found.versions, [vars(call) for call in inplace]]
    digest = hashlib.sha1(json.dumps(key, sort_keys=True).encode()).hexdigest()[:12]
    path = cache_root() / f"catalog-updates-{digest}.json"
    if path.exists():
        data = json.loads(path.read_text())
        calls = [UpdateCall(**{**c, "dtypes": tuple(c["dtypes"]), "mutations": tuple(c["mutations"])}) for c in data[0]]
        return tuple(calls), data[1]
    calls, left = _checked(inplace)
    calls.sort(key=_keeps_some_values)  # (stable: the catalog's order otherwise)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomically(path, json.dumps([[vars(call) for call in calls], left]))  # (workers at once all write the same)
    return tuple(calls), left


def update_calls() -> tuple[UpdateCall, ...]:
    """The catalog's in-place calls a program may update a value with, in the catalog's order, those that leave some
    values as they were last (`_keeps_some_values`)."""
    return _calls_and_left_out()[0]


def left_out() -> dict[str, str]:
    """``<target>#<variant>`` -> why that in-place call of the catalog is not a program update."""
    return _calls_and_left_out()[1]


def _update_kind(name: str, source: Any, flow: Flow) -> LayerKind:
    params = (
        Param("call", "name"),
        Param("target", "name"),
        Param("args", "literal"),
        Param("kwargs", "literal"),
        Param("mutation", "literal", optional=True),
    )
    return LayerKind(name, source, params, functional=True, drawn=False, flow=flow, inplace=flow.updates)


# What each one saves for backward is the op's own affair (tanh_ its result, sin_ a copy of its input):
# conservatively, an update of its value or of what it read is never drawn after it.
CATALOG_FLOW_KINDS = (
    _update_kind("update_op", update_source, Flow(updates=True, saves=True, saves_value=True, twin="op_of",
                                                   plain="sigmoid_")),
    _update_kind("update_op2", update_source, Flow(reads=2, updates=True, saves=True, saves_value=True,
                                                    twin="op_of2", plain="add_")),
    _update_kind("op_of", twin_source, Flow(fresh=True, saves=True, saves_value=True)),
    _update_kind("op_of2", twin_source, Flow(reads=2, fresh=True, saves=True, saves_value=True)),
)  # fmt: skip
