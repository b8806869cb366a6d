"""The source of a layer's call and of a checkpoint's call: the lines `fuzz.model_builder` and
`fuzz.generate.program_source` write a network's methods with."""

from __future__ import annotations

from fuzz.generate.layers import LAYER_KINDS
from fuzz.generate.spec import CheckpointSpec, NetSpec

INDENT = "    "


def applied(spec: NetSpec, index: int) -> str:
    """Layer ``index`` applied to ``x``."""
    layer = spec.layers[index]
    kind = LAYER_KINDS[layer.kind]
    if kind.functional:
        return kind.source(layer.params, spec.widths()[index])
    return kind.apply(layer.params, f"self.layer{index}") if kind.apply else f"self.layer{index}(x)"


def checkpoint_kwargs(ckpt: CheckpointSpec) -> list[str]:
    """The checkpoint options other than use_reentrant that differ from their defaults."""
    kwargs = [] if ckpt.preserve_rng_state else ["preserve_rng_state=False"]
    if ckpt.determinism_check != "default":
        kwargs.append(f"determinism_check={ckpt.determinism_check!r}")
    if ckpt.selective:
        kwargs.append("context_fn=functools.partial(create_selective_checkpoint_contexts, save_matmuls)")
    return kwargs


def checkpoint_options(ckpt: CheckpointSpec) -> str:
    """The keyword arguments of a checkpoint call with ``ckpt``'s options."""
    return ", ".join([f"use_reentrant={ckpt.use_reentrant}", *checkpoint_kwargs(ckpt)])


def method(name: str, body: list[str], signature: str = "x", returns: str = "x") -> list[str]:
    """The lines of method ``name`` of ``signature`` running ``body`` and returning ``returns``."""
    return [f"def {name}(self, {signature}):", *(INDENT + line for line in body), f"{INDENT}return {returns}", ""]


def call(function: str, arguments: str, ckpt: CheckpointSpec, checkpointing: bool) -> str:
    """``function(arguments)`` through ``checkpoint`` with ``ckpt``'s options, or directly."""
    if checkpointing:
        return f"checkpoint({function}, {arguments}, {checkpoint_options(ckpt)})"
    return f"{function}({arguments})"
