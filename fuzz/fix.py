"""The meta-preserving checkpoint converter, and switching between it and thunder's stock one.

The fix is built by wrapping the installed thunder's own `_checkpoint_function_converter`, never
a copy of it: the wrapper copies each replaced FX node's ``meta`` onto its replacement (the
proposed fix, ``thunder_node.meta = n.meta.copy()``), so what runs is exactly that thunder's
converter plus the fix. `thunder.dynamo.utils.checkpoint_converter` looks the converter up as a
module global on every call, so replacing that attribute changes which converter thunder uses
for every checkpointed region it compiles afterwards.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator

import thunder
import thunder.dynamo.utils as thunder_dynamo_utils
import torch

CONVERTERS = ("fixed", "stock")

Converter = Callable[[torch.fx.GraphModule], None]
STOCK_CONVERTER: Converter = thunder_dynamo_utils._checkpoint_function_converter


class StaleFixError(RuntimeError):
    """The fix cannot be built on the installed thunder: its converter no longer works the way the fix assumes."""


def meta_preserving(stock: Converter) -> Converter:
    """Thunder's converter ``stock`` with the fix: every node it replaces passes its ``meta`` to the replacement.

    Thunder's converter replaces each torch op node ``n`` of a checkpointed body by a thunder op
    node through ``n.replace_all_uses_with(thunder_node)``; during the call that method also
    copies ``n.meta`` (example_value, requires_grad, tensor_meta, ...) to ``thunder_node``,
    keeping any entry the replacement already has.
    """

    def converter(gm: torch.fx.GraphModule) -> None:
        replace_all_uses_with = torch.fx.Node.replace_all_uses_with

        def replace_keeping_meta(self, replace_with, *args, **kwargs):
            if not kwargs.get("propagate_meta"):  # torch.fx copies it itself then (and wants an empty meta)
                replace_with.meta = {**self.meta, **replace_with.meta}
            return replace_all_uses_with(self, replace_with, *args, **kwargs)

        try:
            torch.fx.Node.replace_all_uses_with = replace_keeping_meta
            stock(gm)
        finally:
            torch.fx.Node.replace_all_uses_with = replace_all_uses_with

    converter.__name__ = converter.__qualname__ = "meta_preserving_checkpoint_function_converter"
    return converter


FIXED_CONVERTER: Converter = meta_preserving(STOCK_CONVERTER)


def _preserves_meta(converter: Converter) -> bool:
    """Whether ``converter`` keeps each converted node's meta, probed on a traced ``tanh``."""
    gm = torch.fx.symbolic_trace(lambda x: torch.tanh(x))
    for node in gm.graph.nodes:
        node.meta["fuzz_probe"] = node.name
    converter(gm)
    converted = [n for n in gm.graph.nodes if n.op == "call_function"]
    return bool(converted) and all(n.meta.get("fuzz_probe") for n in converted)


@functools.cache
def stock_converter_preserves_meta() -> bool:
    """Whether the installed thunder's own converter already keeps node meta (then the fix is a no-op)."""
    return _preserves_meta(STOCK_CONVERTER)


@functools.cache
def fixed_converter() -> Converter:
    """The fix of the installed thunder's converter; raises `StaleFixError` if wrapping no longer fixes it."""
    if stock_converter_preserves_meta():
        return STOCK_CONVERTER
    if not _preserves_meta(FIXED_CONVERTER):
        raise StaleFixError(
            f"thunder {thunder.__version__}'s _checkpoint_function_converter no longer replaces nodes through "
            "Node.replace_all_uses_with, so the meta-preserving fix cannot be applied to it: update fuzz/fix.py, "
            "or run with --converter stock"
        )
    return FIXED_CONVERTER


def describe(name: str) -> str:
    """Which converter ``name`` is on the installed thunder, in words (for the summary and every repro)."""
    version = f"thunder {thunder.__version__}'s _checkpoint_function_converter"
    if name == "stock":
        return f"stock: {version}, unmodified"
    if stock_converter_preserves_meta():
        return f"fixed: {version} already preserves node meta (the fix is a no-op)"
    return f"fixed: {version}, wrapped to copy each replaced node's meta to its replacement"


def converter_for(name: str) -> Converter:
    """The converter function called ``name`` (one of `CONVERTERS`)."""
    if name == "stock":
        return STOCK_CONVERTER
    if name == "fixed":
        return fixed_converter()
    raise ValueError(f"unknown converter {name!r}: choose one of {', '.join(CONVERTERS)}")


@contextlib.contextmanager
def use_converter(name: str = "fixed") -> Iterator[Converter]:
    """Install converter ``name`` in thunder for the duration of the block, then restore what was there.

    Nesting and installing twice are harmless: each exit restores what its own entry found.
    """
    converter = converter_for(name)
    previous = thunder_dynamo_utils._checkpoint_function_converter
    thunder_dynamo_utils._checkpoint_function_converter = converter
    try:
        yield converter
    finally:
        thunder_dynamo_utils._checkpoint_function_converter = previous
