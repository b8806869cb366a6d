"""Several independent networks compiled and run by one thunderfx call (`run_thunderfx_batch`).

A thunderfx run of one small network costs about a second on CPU, a third of it fixed whatever the network (dynamo's
reset, thunder's and dynamo's set-up and clean-up around the compile: docs/performance.md): K networks side by side in
one module (`Batched`: member i's forward on input i) pay that part once. Each member's
output, gradients and mutable state come back in the shape `fuzz.run.passes.forward_backward` gives alone.
"""

from __future__ import annotations

import contextlib
import itertools
import sys
import types
from collections.abc import Iterator, Sequence

import torch
from torch import nn

from fuzz.model_builder import Example
from fuzz.run.passes import AFTER_FORWARD, call_on, fresh_input, gradients_and_state, mutable_state
from fuzz.run.runner import THUNDER_PHASE, CompileReport, compile_report, forget_compilations, in_phase, ours


class Batched(nn.Module):
    """Member networks side by side: ``forward(*xs)`` is each member's output on its own input.

    A graph break after each member: every member is a dynamo graph of its own, with its input and output, which thunder
    compiles as it would alone. Without them the members were one graph, and 3 of the registry's 34 batchable bugs
    (expand-to-zero-size-crash, negative-pad-crash, unused-inplace-update-crash) did not show inside a batch."""

    def __init__(self, nets: Sequence[nn.Module]) -> None:
        super().__init__()
        self.members = nn.ModuleList(nets)

    def forward(self, *xs: torch.Tensor) -> tuple[torch.Tensor, ...]:
        outputs = []
        for net, x in zip(self.members, xs, strict=True):
            outputs.append(call_on(net, x))
            torch._dynamo.graph_break()
        return tuple(outputs)


_BATCHES = itertools.count()


def member_modules(count: int) -> list[types.ModuleType]:
    """``count`` empty modules for a batch's members to be built in, named as no earlier batch's were: dynamo caches
    the modules it imported by name for the whole process (`importable`)."""
    batch = next(_BATCHES)
    return [types.ModuleType(f"fuzz_batch{batch}_member{index}") for index in range(count)]


@contextlib.contextmanager
def importable(modules: Sequence[types.ModuleType]) -> Iterator[None]:
    """``modules`` in ``sys.modules`` for the block: dynamo imports the module of every function it inlines whose
    globals are not the compiled frame's (each member's code, under `Batched.forward`). After it, dynamo's hold on them
    goes too (its process-wide cache of imported modules, its aliases of them in this module's globals): a night of
    batches would otherwise keep every network's code."""
    for module in modules:
        sys.modules[module.__name__] = module
    try:
        yield
    finally:
        for module in modules:
            sys.modules.pop(module.__name__, None)
            globals().pop(f"__import_{module.__name__}", None)
        from torch._dynamo import symbolic_convert  # (torch 2.9: a functools.cache; guarded for other versions)

        getattr(getattr(symbolic_convert, "_import_module", None), "cache_clear", lambda: None)()


def run_thunderfx_batch(examples: Sequence[Example], modules: Sequence[types.ModuleType]) -> tuple[list, CompileReport]:
    """``(output, grads)`` of each of ``examples`` (built in ``modules``, `fuzz.model_builder.build_example`) from one
    thunderfx forward and backward of them side by side, each output with its own cotangent; and the batch's report.

    The examples' own networks run (built for the batch: nothing else uses them); dynamo is reset before and after,
    as for one network (`fuzz.run.runner.run_thunderfx`).
    """
    from thunder.dynamo import thunderfx

    ours(forget_compilations)
    # Each member is a recompile of the same module-call code: without this, dynamo would make later members' sizes
    # dynamic, as no network alone gets.
    with in_phase(THUNDER_PHASE), importable(modules), torch._dynamo.config.patch(automatic_dynamic_shapes=False):
        try:
            nets, xs = [example.net for example in examples], [fresh_input(example.input) for example in examples]
            compiled = thunderfx(Batched(nets))
            torch.manual_seed(0)
            outputs = compiled(*xs)
            after_forward = [mutable_state(net, x, AFTER_FORWARD) for net, x in zip(nets, xs, strict=True)]
            torch.autograd.backward(outputs, [example.cotangent for example in examples])
            results = [
                (output.detach(), gradients_and_state(net, x, state))
                for output, net, x, state in zip(outputs, nets, xs, after_forward, strict=True)
            ]
            return results, ours(compile_report, compiled._backend)
        finally:
            ours(forget_compilations)
