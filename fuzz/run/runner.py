"""Run one example eagerly and under thunderfx, and report what thunder actually compiled."""

from __future__ import annotations

import contextlib
import copy
import faulthandler
import linecache
import signal
import threading
import time
import traceback
import weakref
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import torch

from fuzz.model_builder import Example
from fuzz.run.global_modes import ModesLeft, global_modes_kept
from fuzz.run.passes import SavedForBackward, Training, float64_reference, forward_backward, fresh_input, saved_by
from fuzz.run.regions import RegionReport, read_regions
from fuzz.run.stops import alarm_cut_by_a_stop, raising_is_lost, stop_if_interrupted

_CHECKPOINT_OP = torch.ops.higher_order.tag_activation_checkpoint
# linecache entries of the source thunder generates for traces and torch.fx for graph modules.
_GENERATED_SOURCES = ("thunder.", "<eval_with_key>")


def time_limit_message(seconds: float) -> str:
    """What a run past the per-example limit says (`ExampleTimeout.limit_s` reads the limit back from it)."""
    return f"exceeded the per-example time limit of {seconds:g} s"


class HarnessError(Exception):
    """An exception raised by the harness's own code while it ran thunder: a bug of ours, never blamed on thunder.

    Chained to the original exception, whose traceback says where in the harness it was raised.
    """

    @classmethod
    def of(cls, error: BaseException, step: str) -> HarnessError:
        """The harness error for ``error``, raised in the harness's ``step``, naming where it was raised."""
        frames = traceback.extract_tb(error.__traceback__)
        where = f" ({Path(frames[-1].filename).name}:{frames[-1].lineno})" if frames else ""
        return cls(f"the harness raised {type(error).__name__} in {step}{where}: {error}")


@dataclass
class CompileReport:
    """What thunderfx did with the network: how many dynamo graphs, which regions thunder compiled."""

    graphs: int = 0
    thunder_checkpoints: int = 0
    fallback_checkpoints: int = 0
    fallback_submodules: int = 0
    split_reasons: list[str] = field(default_factory=list)
    # What the first forward saved for backward (`fuzz.run.passes.SavedForBackward`); None: not measured (a batch).
    saved_bytes: int | None = 0
    # What thunder did with each checkpointed region, read from its traces; None: not read (a batch).
    regions: RegionReport | None = None

    def compiled_everything(self, expected_checkpoints: int) -> bool:
        """Thunder compiled every graph and all ``expected_checkpoints`` checkpointed regions."""
        return self.graphs > 0 and self.fallback_submodules == 0 and self.thunder_checkpoints == expected_checkpoints


def compile_report(backend) -> CompileReport:
    report = CompileReport(graphs=len(backend.subgraph_infos))
    for info in backend.subgraph_infos:
        report.split_reasons += [str(reason.info) for reason in info.split_reasons or ()]
        for submodule, compiled in info.submodule_to_compiled_functions.items():
            checkpoints = len(submodule.graph.find_nodes(op="call_function", target=_CHECKPOINT_OP))
            if compiled.compiler.name == "THUNDER":
                report.thunder_checkpoints += checkpoints
            else:
                report.fallback_checkpoints += checkpoints
                report.fallback_submodules += 1
    return report


# What a process is running, for a campaign's record of the network in flight (`in_phase`): should the process die,
# only a death in thunder's phase is a thunder finding; one in eager PyTorch (the run, its float64 reference, the
# nudged copies) is not.
THUNDER_PHASE = "thunder"
_phase = {"now": None, "listener": None}


def on_phase_change(listener: Callable[[str | None], None] | None) -> None:
    """Call ``listener(phase)`` whenever `in_phase` enters or leaves a phase (None: no listener)."""
    _phase["listener"] = listener


@contextlib.contextmanager
def in_phase(name: str) -> Iterator[None]:
    """Mark the block as phase ``name`` ("eager", "reference", "nudged", `THUNDER_PHASE`); the outer phase after.
    Entering a phase is a safe point of a stopped run (`fuzz.run.stops`). The global grad, inference and autocast
    modes are as before after it (`fuzz.run.global_modes`)."""
    stop_if_interrupted()
    outer, _phase["now"] = _phase["now"], name
    if _phase["listener"] is not None:
        _phase["listener"](name)
    try:
        with global_modes_kept():
            yield
    except ModesLeft as error:
        raise HarnessError(str(error)) from error
    finally:
        _phase["now"] = outer
        if _phase["listener"] is not None:
            _phase["listener"](outer)


def _fresh_copy(example: Example) -> tuple[torch.nn.Module, torch.Tensor]:
    return copy.deepcopy(example.net), fresh_input(example.input)


def training_of(example: Example) -> Training | None:
    """The example's training steps (None: one forward and backward), every step starting where eager's own steps
    leave it (computed once per example)."""
    steps = example.training
    if steps is None:
        return None
    if steps.starts is None:
        with in_phase("eager"):
            training = Training(steps.optimizer, steps.batches)
            steps.starts = training.with_starts(example.net, example.input, example.cotangent).starts
    return Training(steps.optimizer, steps.batches, steps.starts)


def run_eager(example: Example) -> tuple:
    """``(output, grads)`` of plain eager PyTorch on a copy of the example."""
    with in_phase("eager"):
        net, x = _fresh_copy(example)
        return forward_backward(net, net, x, example.cotangent, training_of(example))


def eager_saved(example: Example) -> SavedForBackward:
    """What eager's forward of a copy of the example saves for backward."""
    with in_phase("eager"):
        net, x = _fresh_copy(example)
        meter = saved_by(net, net, x)
        if meter.error is not None:
            raise HarnessError.of(meter.error, "SavedForBackward") from meter.error
        return meter


def run_reference(example: Example) -> tuple | None:
    """``(output, grads)`` of eager in float64 for a lower-precision example; None for a float64 one."""
    if example.cotangent.dtype == torch.float64:
        return None
    training = training_of(example)
    with in_phase("reference"):
        return float64_reference(example.net, example.input, example.cotangent, training)


def run_thunderfx(example: Example) -> tuple[tuple, CompileReport]:
    """``(output, grads)`` of `thunder.dynamo.thunderfx` on a copy of the example, and its `CompileReport`.

    Dynamo is reset first: its per-code-object cache would otherwise hit the recompile limit
    after a few examples and silently run eager from then on. An exception from the harness's own
    steps around thunder's run (forgetting compilations, reading the compile report) is a
    `HarnessError`; one from compiling or running the network is thunder's.
    """
    from thunder.dynamo import thunderfx

    ours(forget_compilations)
    # Reading thunder's report and releasing its compiled function are in thunder's phase too: a process dying in
    # native code there dies in thunder's objects (a Python exception in those steps is still ours, `ours`).
    with in_phase(THUNDER_PHASE):
        try:
            net, x = _fresh_copy(example)
            compiled, meter = thunderfx(net), ours(SavedForBackward, net, x)
            result = forward_backward(meter.measuring(compiled), net, x, example.cotangent, ours(training_of, example))
            if meter.error is not None:
                raise HarnessError.of(meter.error, "SavedForBackward") from meter.error
            report = ours(compile_report, compiled._backend)
            report.saved_bytes, report.regions = meter.bytes, ours(read_regions, compiled._backend)
            return result, report
        finally:
            ours(forget_compilations)


def _directional_derivatives(fn, net, x, cotangent, step: float) -> tuple[float, float, float]:
    """``(gradient . v, (L(p + step v) - L(p - step v)) / (2 step), L(p))`` of ``fn`` (``net`` or a compiled
    ``net``) with L = <output, cotangent>, p the parameters and v a seeded random direction; every forward seeded
    alike (`fuzz.run.passes.forward_backward`), so each draws the random masks of the one differentiated."""
    output, _ = forward_backward(fn, net, x, cotangent)
    params = list(net.parameters())
    generator = torch.Generator().manual_seed(0)
    direction = [torch.randn(p.shape, generator=generator, dtype=p.dtype).to(p.device) for p in params]
    analytic = sum((p.grad * d).sum().item() for p, d in zip(params, direction, strict=True) if p.grad is not None)

    def loss(along: float) -> float:
        originals = [p.detach().clone() for p in params]
        with torch.no_grad():
            for p, d in zip(params, direction, strict=True):
                p.add_(along * d)
        torch.manual_seed(0)
        value = (fn(x).detach() * cotangent).sum().item()
        with torch.no_grad():
            for p, original in zip(params, originals, strict=True):
                p.copy_(original)
        return value

    return analytic, (loss(step) - loss(-step)) / (2 * step), (output * cotangent).sum().item()


def run_eager_self_consistency(example: Example, step: float = 1e-6) -> tuple[float, float, float]:
    """`run_thunderfx_self_consistency`'s numbers for eager: the control that tells a loss too rough for central
    differences from a wrong gradient."""
    with in_phase("eager"):
        net, x = _fresh_copy(example)
        return _directional_derivatives(net, net, x, example.cotangent, step)


def run_thunderfx_self_consistency(
    example: Example, step: float = 1e-6
) -> tuple[tuple[float, float, float], CompileReport]:
    """Whether thunderfx's gradient is the derivative of its own forward, random ops included: for a float64
    ``example``, `_directional_derivatives` of thunderfx with checkpoints, and thunder's compile report."""
    from thunder.dynamo import thunderfx

    ours(forget_compilations)
    with in_phase(THUNDER_PHASE):  # the finite differences run thunder too (and see `run_thunderfx`)
        try:
            net, x = _fresh_copy(example)
            compiled = thunderfx(net)
            numbers = _directional_derivatives(compiled, net, x, example.cotangent, step)
            return numbers, ours(compile_report, compiled._backend)
        finally:
            ours(forget_compilations)


def ours(step, *args):
    """``step(*args)``, a step of the harness's own: any exception it raises becomes a `HarnessError`."""
    try:
        return step(*args)
    except Exception as error:
        raise HarnessError.of(error, step.__name__) from error


# Executors the campaign puts in front of thunder's defaults on CUDA where they are installed.
CUDA_EXECUTORS = ("cudnn", "nvfuser")


def executor_names(requested: str, device: str) -> tuple[str, ...]:
    """thunder's default executors for a campaign, by name: empty for thunder's own defaults.

    ``requested``: "auto" (on CUDA, `CUDA_EXECUTORS` that are installed in front of thunder's
    defaults; on CPU, thunder's defaults) or a comma-separated list of executor names. Raises
    ValueError naming an executor this thunder installation does not have.
    """
    from thunder.extend import get_all_executors, get_default_executors

    installed = [executor.name for executor in get_all_executors()]
    if requested == "auto":
        extra = [name for name in CUDA_EXECUTORS if name in installed] if device == "cuda" else []
        defaults = [executor.name for executor in get_default_executors()]
        return tuple(dict.fromkeys([*extra, *defaults])) if extra else ()
    names = tuple(name.strip() for name in requested.split(",") if name.strip())
    if unknown := [name for name in names if name not in installed] or not names:
        problem = f"{', '.join(unknown)} not installed" if unknown else "empty list"
        raise ValueError(f"--fuzz-executors: {problem}; this thunder has {', '.join(installed)} (or use auto)")
    return names


def use_executors(names: tuple[str, ...]) -> None:
    """Make ``names`` thunder's default executors for this process (nothing to do when empty)."""
    from thunder.extend import get_executor, set_default_executors

    if names:
        set_default_executors([get_executor(name) for name in names])


def forget_compilations() -> None:
    """Drop what dynamo and thunder keep of past compilations, so a long campaign stays flat in memory.

    Dynamo's cache would hit its recompile limit and silently run eager; it also keeps the last
    backend (thunder's compiler, with every trace) alive until the next reset. Thunder's cache of
    augmented forward/backward rules (`thunder.core.vjp_utils._cache`) and the generated sources
    that thunder and torch.fx register for tracebacks grow with every new shape, without bound.
    And dynamo's reset leaves the ``weakref.finalize`` hooks its guards put on long-lived objects
    (types, modules, code), each holding a guard manager and what its guards reference (torch
    2.9: ~20 per example). Measured without all this: +397 MB over 500 examples.
    """
    import thunder.core.vjp_utils
    import torch.fx.graph_module
    from torch._dynamo.guards import CheckFunctionManager

    torch._dynamo.reset()
    for finalizer, info in list(weakref.finalize._registry.items()):
        method = getattr(info.func, "func", None)  # functools.partial(guard_manager.invalidate, ...)
        if getattr(method, "__func__", None) is CheckFunctionManager.invalidate:
            finalizer.detach()
    thunder.core.vjp_utils._cache.clear()
    torch.fx.graph_module._loader.eval_cache.clear()
    for name in [name for name in linecache.cache if name.startswith(_GENERATED_SOURCES)]:
        del linecache.cache[name]


class Deadline(BaseException):
    """Raised by `time_limit` when time is up.

    A BaseException, like KeyboardInterrupt, so that thunder's and dynamo's ``except Exception``
    fallbacks cannot swallow it and turn a hung compile into a silent eager fallback.
    """


@dataclass
class TimeLimit:
    """Whether the limit of a `time_limit` block expired (thunder's interpreter may wrap the `Deadline`)."""

    seconds: float | None
    expired: bool = False


def hard_limit(seconds: float) -> float:
    """When a block under `time_limit` (``seconds``) ends the whole process: the alarm could not stop it."""
    return 2 * seconds + 10


# Code that the alarm must not interrupt: an exception there leaves process-wide state half-built
# and every later example in the process fails for it. Measured: a limit that expired inside
# inductor's compile of thunderfx's fallback left its pattern matcher half-registered, or its C++
# code cache holding a build thread's `KeyError: 'compile_file'` (our next `torch._dynamo.reset()`
# cleared the timing dict the thread was writing to); each later run of that network then
# "crashed". Imports are process-wide too. The hard limit still ends a hang in there.
_SHARED_INITIALISATION = ("torch._inductor", "importlib._bootstrap")
_RETRY_S = 0.1


def _inside_shared_initialisation(frame) -> bool:
    """Whether the interrupted stack runs inductor's compiler or an import."""
    while frame is not None:
        if frame.f_globals.get("__name__", "").startswith(_SHARED_INITIALISATION):
            return True
        frame = frame.f_back
    return False


@contextlib.contextmanager
def time_limit(seconds: float | None) -> Iterator[TimeLimit]:
    """Raise `Deadline` in the block after ``seconds`` of wall clock (no limit when None or off the main thread); once a
    signal stopped the run (`fuzz.run.stops`), raise KeyboardInterrupt instead, `fuzz.run.stops.STOP_GRACE_S` after
    the signal at the latest (entering the block is a safe point too).

    The alarm waits while inductor compiles or a module is imported (see `_SHARED_INITIALISATION`),
    or where its exception would be lost (`fuzz.run.stops.raising_is_lost`: a garbage collection),
    for at most another `hard_limit`. Its handler runs only between Python bytecodes; a hang
    inside native code (or with the signal blocked) cannot see it. So after `hard_limit` seconds
    without the handler running, faulthandler's watchdog thread, which needs no Python, dumps every
    thread's traceback and exits the process: under xdist the controller reports the in-flight
    network as a worker crash and starts a new worker.
    """
    stop_if_interrupted()
    limit = TimeLimit(seconds)
    if not seconds or threading.current_thread() is not threading.main_thread():
        yield limit
        return

    expired_at: float | None = None

    def expire(signum, frame):
        nonlocal expired_at
        expired_at = expired_at or time.monotonic()
        waits = _inside_shared_initialisation(frame) or raising_is_lost(frame)
        if waits and time.monotonic() - expired_at < hard_limit(seconds):
            # Python is running, so no hang the watchdog is for: restart its count.
            faulthandler.dump_traceback_later(hard_limit(seconds), exit=True)
            signal.setitimer(signal.ITIMER_REAL, _RETRY_S)
            return
        stop_if_interrupted()
        limit.expired = True
        raise Deadline(time_limit_message(seconds))

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    faulthandler.dump_traceback_later(hard_limit(seconds), exit=True)
    try:
        with alarm_cut_by_a_stop():
            yield limit
    finally:
        faulthandler.cancel_dump_traceback_later()
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
