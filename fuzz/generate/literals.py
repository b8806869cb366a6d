"""OpInfo sample values as the op family's literals (the inverse of `fuzz.generate.ops.render`), and how literals
are ordered: smaller and closer to the defaults first."""

from __future__ import annotations

import math
import re
from typing import Any

_MAX_INDEX_VALUES = 512  # integer tensors larger than this are not written out as literals
_FLOAT_DIGITS = 4


class NotLiteral(ValueError):
    """A sample argument that cannot be written as a literal; the message says what it is."""


def encode(value: Any, tensors: list) -> Any:
    """``value`` as a literal (see `fuzz.generate.ops.render`); float tensors are numbered in ``tensors``."""
    import torch

    if isinstance(value, torch.Tensor):
        if value.numel() == 0:
            raise NotLiteral("an empty tensor")
        if value.is_complex():
            raise NotLiteral("a complex tensor")
        if value.is_floating_point():
            data = value.detach().double()
            finite = data[torch.isfinite(data)]
            low, high = (float(finite.min()), float(finite.max())) if finite.numel() else (-1.0, 1.0)
            entry = {
                "tensor": list(value.shape),
                "low": round(low, _FLOAT_DIGITS),
                "high": round(high, _FLOAT_DIGITS),
                "offset": len(tensors),
            }
            if not value.requires_grad:  # e.g. batch_norm's running statistics
                entry["grad"] = False
            tensors.append(entry)
            return entry
        if value.numel() > _MAX_INDEX_VALUES:
            raise NotLiteral(f"an integer tensor of {value.numel()} values")
        return {"values": value.tolist(), "dtype": str(value.dtype).removeprefix("torch.")}
    if isinstance(value, bool | int | type(None)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else {"float": str(value)}
    if isinstance(value, str):
        return {"device": None} if re.fullmatch(r"cpu|cuda(:\d+)?", value) else value
    if isinstance(value, torch.dtype):
        return {"dtype": str(value).removeprefix("torch.")}
    if isinstance(value, torch.device):
        return {"device": None}
    if isinstance(value, tuple):  # torch.Size too
        return {"tuple": [encode(v, tensors) for v in value]}
    if isinstance(value, list):
        return [encode(v, tensors) for v in value]
    if isinstance(value, slice):
        return {"slice": [encode(v, tensors) for v in (value.start, value.stop, value.step)]}
    raise NotLiteral(f"an argument of type {type(value).__name__}")


def shape_free(value: Any) -> Any:
    """A literal with tensor shapes and values left out: what tells two argument variants apart."""
    if isinstance(value, list):
        return [shape_free(v) for v in value]
    if isinstance(value, dict):
        if "tensor" in value:
            return "float tensor"
        if "values" in value:
            return f"{value['dtype']} tensor"
        return {k: shape_free(v) for k, v in value.items()}
    return value


def _numel(literal: Any) -> int:
    if isinstance(literal, list):
        return sum(_numel(v) for v in literal)
    if isinstance(literal, dict):
        if "tensor" in literal:
            return math.prod(literal["tensor"])
        return sum(_numel(v) for v in literal.values())
    return 0


def size_order(literal: Any) -> tuple[bool, int]:
    """Smaller first, but a sample of one element (a scalar) after any larger one: it tests little."""
    numel = _numel(literal)
    return numel < 2, numel


def explicit_arguments(args: list, kwargs: dict) -> int:
    """How many arguments a call spells out beyond its tensors (fewer: closer to the defaults)."""
    return sum(not (isinstance(a, dict) and "tensor" in a) for a in args) + sum(v is not None for v in kwargs.values())
