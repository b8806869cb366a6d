"""The body of every repro.py, as a module that imports, lints and runs in the package: `fuzz.report.repro` writes a
repro as this source with the block between its ``# repro.py:`` markers replaced by the network's source, the
failure's constants, the oracle's source and the converter fix. Exit 0 matches, 1 reproduces, 2 anything else."""

from __future__ import annotations

import os
import sys


def _could_not_run(kind, value, tb):
    sys.__excepthook__(kind, value, tb)
    print("COULD NOT RUN: the repro failed before thunderfx ran", flush=True)
    sys.stderr.flush()
    os._exit(2)


if __name__ == "__main__":  # first in a repro.py: an exception before `main` (an import that fails) exits 2, not 1
    sys.excepthook = _could_not_run


# repro.py: begin of the definitions. A repro.py defines these names itself (the network's source, the failure's
# constants, fuzz.run.passes and fuzz.judge.tolerance, the converter fix); in the package they come from there.
from collections.abc import Sequence  # noqa: E402

import torch  # noqa: E402

from fuzz.fix import meta_preserving  # noqa: E402
from fuzz.generate.spec import NetSpec  # noqa: E402
from fuzz.judge.failures import ExampleTimeout, ParityFailure  # noqa: E402
from fuzz.judge.memory import memory_failure, saved_by_reason  # noqa: E402
from fuzz.judge.tolerance import compare, crash_signature, failure_class, right_one_precision_up  # noqa: E402
from fuzz.model_builder import build_example  # noqa: E402
from fuzz.run.passes import (  # noqa: E402
    Training,
    float64_reference,
    forward_backward,
    fresh_input,
    nudged_runs,
)
from fuzz.run.regions import read_regions  # noqa: E402

CONVERTER = "fixed"
EXECUTORS: list[str] = []
RANDOM = False
EXPECTED_CLASS = ""
EXPECTED_ERROR = ""
TIME_LIMIT_S: float | None = None
PRECISION = "float32"
DTYPE = torch.float32
DEVICE = "cpu"
_SPEC: NetSpec | None = None


def constants(spec: NetSpec, failure: ParityFailure, converter: str, executors: Sequence[str] = ()) -> dict:
    """The failure's constants a repro.py of ``spec`` and ``failure`` defines (``DTYPE`` and ``DEVICE`` are the
    network source's)."""
    return {
        "CONVERTER": converter,
        "EXECUTORS": list(executors),
        "RANDOM": spec.random,
        "PRECISION": spec.precision,
        "EXPECTED_CLASS": failure.failure_class,
        "EXPECTED_ERROR": getattr(failure, "crash_signature", ""),
        "TIME_LIMIT_S": failure.limit_s if isinstance(failure, ExampleTimeout) else None,
    }


def bind(spec: NetSpec, failure: ParityFailure, converter: str = "fixed", executors: Sequence[str] = ()) -> None:
    """Make this module the repro.py of ``spec`` and ``failure``: `main` then runs what that file runs."""
    global _SPEC, DTYPE, DEVICE
    globals().update(constants(spec, failure, converter, executors))
    _SPEC, DTYPE, DEVICE = spec, getattr(torch, spec.dtype), spec.device
    for name in ("OPTIMIZER", "make_batches"):
        globals().pop(name, None)
    if spec.training is not None:  # as the network source of a spec that trains defines them
        globals().update(OPTIMIZER=spec.training.optimizer, make_batches=lambda: build_example(spec).training.batches)


def make_example(checkpointing=True):
    """The bound network (`bind`): ``(net, x, cotangent)``, as a repro.py's own ``make_example``."""
    assert _SPEC is not None, "bind(spec, failure) first"
    example = build_example(_SPEC, checkpointing)
    return example.net, example.input, example.cotangent


# repro.py: end of the definitions.


def _verdict():
    """(failure class or "pass", the crash signature for a crash, else "") of thunderfx on this network."""
    import copy
    import traceback

    import thunder.dynamo.utils
    import thunder.extend
    from thunder.dynamo import thunderfx

    if CONVERTER == "fixed":
        stock = thunder.dynamo.utils._checkpoint_function_converter
        thunder.dynamo.utils._checkpoint_function_converter = meta_preserving(stock)
    if EXECUTORS:  # else thunder's default executors
        thunder.extend.set_default_executors([thunder.extend.get_executor(name) for name in EXECUTORS])
    net, x, cotangent = make_example()
    training = None
    if "make_batches" in globals():  # a network that trains: each step from eager's own parameters at that step
        training = Training(OPTIMIZER, make_batches()).with_starts(net, x, cotangent)  # noqa: F821
    if TIME_LIMIT_S is not None:
        # Thunder's first compile in a process pays one-off set-up, which the campaign's limit did not count (it runs
        # a time-out once more before counting it): a one-layer network pays it before any clock starts.
        warm_up = torch.nn.Linear(1, 1, device=DEVICE, dtype=DTYPE)
        thunderfx(warm_up)(torch.ones(1, 1, device=DEVICE, dtype=DTYPE)).sum().backward()
    try:
        if RANDOM:
            # Eager and thunder draw different random streams: the expected result is thunderfx's
            # own run of the same network without checkpoints, under the same seed.
            plain, _, _ = make_example(checkpointing=False)
            expected = _limited(lambda: forward_backward(thunderfx(plain), plain, fresh_input(x), cotangent))
            reference, probe = None, None
        thunder_net, thunder_x = copy.deepcopy(net), fresh_input(x)
        thunder_fn = thunderfx(thunder_net)
        result = _limited(lambda: forward_backward(thunder_fn, thunder_net, thunder_x, cotangent, training))
    except Exception as error:
        traceback.print_exc()
        return "thunder-crash", crash_signature(type(error).__name__, str(error))
    up = None
    if not RANDOM:
        eager_net = copy.deepcopy(net)
        expected = forward_backward(eager_net, eager_net, fresh_input(x), cotangent, training)
        reference = float64_reference(net, x, cotangent, training) if DTYPE != torch.float64 else None
        probe = lambda: nudged_runs(net, x, cotangent, training=training)  # noqa: E731
        if reference is not None and getattr(torch, PRECISION) == DTYPE:  # not under autocast (as the harness)
            up = lambda: right_one_precision_up(_thunderfx_run, net, x, cotangent, reference, training)  # noqa: E731
    forward, gradients = compare(result, expected, reference, probe, getattr(torch, PRECISION))
    for line in forward + gradients:
        print(line)
    return failure_class(forward, gradients, up) or _memory_verdict(thunder_fn), ""


def _memory_verdict(thunder_fn):
    """ "memory" where a checkpointed region of thunderfx's run ``thunder_fn`` is not recomputed in backward (read from
    thunder's traces), else "pass"."""
    regions = read_regions(thunder_fn._backend)
    message = memory_failure(regions)
    print(message or f"every checkpointed region is recomputed in backward; {saved_by_reason(regions)}")
    return "memory" if message else "pass"


def _limited(thunderfx_run):
    """``thunderfx_run()``; for a recorded time-out, each run under the recorded limit, as in the campaign."""
    if TIME_LIMIT_S is None:
        return thunderfx_run()
    import threading

    watchdog = threading.Timer(TIME_LIMIT_S, _ran_past_the_time_limit)
    watchdog.daemon = True
    watchdog.start()
    try:
        return thunderfx_run()
    finally:
        watchdog.cancel()


def _ran_past_the_time_limit():
    print(f"REPRODUCED: timeout (thunderfx ran past the time limit of {TIME_LIMIT_S:g} s)", flush=True)
    os._exit(1)  # thunderfx's run is not waited for: it may take many minutes more


def _thunderfx_run(net, x, cotangent, training=None):
    """thunderfx's `forward_backward` of ``net``, or None where it raised."""
    from thunder.dynamo import thunderfx

    try:
        return forward_backward(thunderfx(net), net, fresh_input(x), cotangent, training)
    except Exception:
        return None


def main():
    try:
        verdict, signature = _verdict()
    except Exception:
        import traceback

        traceback.print_exc()
        print("COULD NOT RUN: the repro failed outside thunderfx's run")
        return 2
    if verdict == "pass":
        print(f"NOT REPRODUCED: thunderfx matches {'itself without checkpoints' if RANDOM else 'eager'}")
        return 0
    if (verdict, signature) == (EXPECTED_CLASS, EXPECTED_ERROR):
        print(f"REPRODUCED: {verdict} {signature}".rstrip())
        return 1
    print(f"OTHER FAILURE: {verdict} {signature} where {EXPECTED_CLASS} {EXPECTED_ERROR} was recorded")
    return 2


if __name__ == "__main__":
    sys.exit(main())
