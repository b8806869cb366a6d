"""The meta-preserving checkpoint converter, and switching between it and thunder's stock one.

`thunder.dynamo.utils.checkpoint_converter` looks `_checkpoint_function_converter` up as a
module global on every call, so replacing that attribute is enough to change which converter
thunder uses for every checkpointed region it compiles afterwards.
"""

from __future__ import annotations

import contextlib
import functools
import warnings
from collections.abc import Callable, Iterator

import thunder.dynamo.utils as thunder_dynamo_utils
import torch

CONVERTERS = ("fixed", "stock")

STOCK_CONVERTER: Callable[[torch.fx.GraphModule], None] = thunder_dynamo_utils._checkpoint_function_converter


def meta_preserving_checkpoint_function_converter(gm: torch.fx.GraphModule) -> None:
    """Replace the torch ops of a checkpointed body ``gm`` by thunder ops, in place, keeping each node's ``meta``.

    Identical to thunder 0.2.6's `_checkpoint_function_converter` except for the copied
    ``meta`` (example_value, requires_grad, tensor_meta, ...), which the stock version drops.
    """
    from thunder.dynamo.utils import _torch_to_thunder_function_map, recompile_graph

    for n in gm.graph.nodes:
        if n.op == "call_module":
            raise RuntimeError(
                "Unexpected call_module detected inside a checkpoint. This should have been inlined in dynamo graphs"
            )
        if n.op != "call_function" or n.target.__module__ in ("_operator", "builtins"):
            continue
        if n.target not in _torch_to_thunder_function_map:
            raise RuntimeError(f"Unexpected {n.target}, not registered in Thunder")
        with gm.graph.inserting_before(n):
            thunder_node = gm.graph.call_function(
                _torch_to_thunder_function_map[n.target], args=n.args, kwargs=n.kwargs
            )
        thunder_node.meta = n.meta.copy()
        n.replace_all_uses_with(thunder_node)
        gm.graph.erase_node(n)
    gm.graph.lint()
    recompile_graph(gm)


@functools.cache
def stock_converter_preserves_meta() -> bool:
    """Whether the installed thunder's own converter already keeps node meta (then the fix is a no-op)."""
    gm = torch.fx.symbolic_trace(lambda x: torch.tanh(x))
    for node in gm.graph.nodes:
        node.meta["fuzz_probe"] = node.name
    STOCK_CONVERTER(gm)
    converted = [n for n in gm.graph.nodes if n.op == "call_function"]
    return bool(converted) and all(n.meta.get("fuzz_probe") for n in converted)


def converter_for(name: str) -> Callable[[torch.fx.GraphModule], None]:
    """The converter function called ``name`` (one of `CONVERTERS`)."""
    if name == "stock":
        return STOCK_CONVERTER
    if name == "fixed":
        if stock_converter_preserves_meta():
            warnings.warn(
                "installed thunder already preserves node meta in its checkpoint converter; the fix is a no-op",
                stacklevel=2,
            )
            return STOCK_CONVERTER
        return meta_preserving_checkpoint_function_converter
    raise ValueError(f"unknown converter {name!r}: choose one of {', '.join(CONVERTERS)}")


@contextlib.contextmanager
def use_converter(name: str = "fixed") -> Iterator[Callable[[torch.fx.GraphModule], None]]:
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
