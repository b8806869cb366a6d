"""A failure's standalone repro.py: the network's source, the oracle's arithmetic and a verdict, in plain torch and
thunder (exit 0 matches, 1 reproduces, 2 anything else)."""

from __future__ import annotations

import inspect
import re
from collections.abc import Sequence

import fuzz.judge.parity
import fuzz.run.passes
from fuzz.fix import describe, meta_preserving
from fuzz.generate.spec import NetSpec
from fuzz.judge.oracle import ExampleTimeout, ParityFailure
from fuzz.model_builder import network_source

_REPRO_MAIN = """

def _verdict():
    \"\"\"(failure class or "pass", the crash signature for a crash, else "") of thunderfx on this network.\"\"\"
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
        thunder_net = copy.deepcopy(net)
        result = _limited(lambda: forward_backward(thunderfx(thunder_net), thunder_net, fresh_input(x), cotangent))
    except Exception as error:
        traceback.print_exc()
        return "thunder-crash", crash_signature(type(error).__name__, str(error))
    up = None
    if not RANDOM:
        eager_net = copy.deepcopy(net)
        expected = forward_backward(eager_net, eager_net, fresh_input(x), cotangent)
        reference = float64_reference(net, x, cotangent) if DTYPE != torch.float64 else None
        probe = lambda: nudged_runs(net, x, cotangent)  # noqa: E731
        if reference is not None:
            up = lambda: right_one_precision_up(_thunderfx_run, net, x, cotangent, reference)  # noqa: E731
    forward, gradients = compare(result, expected, reference, probe)
    for line in forward + gradients:
        print(line)
    return failure_class(forward, gradients, up) or "pass", ""


def _limited(thunderfx_run):
    \"\"\"``thunderfx_run()``; for a recorded time-out, each run under the recorded limit, as in the campaign.\"\"\"
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


def _thunderfx_run(net, x, cotangent):
    \"\"\"thunderfx's `forward_backward` of ``net``, or None where it raised.\"\"\"
    from thunder.dynamo import thunderfx

    try:
        return forward_backward(thunderfx(net), net, fresh_input(x), cotangent)
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
"""


# First in every repro.py: an exception before `main` (an import that fails) exits 2, not Python's 1.
_REPRO_PRELUDE = """from __future__ import annotations

import os
import sys


def _could_not_run(kind, value, tb):
    sys.__excepthook__(kind, value, tb)
    print("COULD NOT RUN: the repro failed before thunderfx ran", flush=True)
    sys.stderr.flush()
    os._exit(2)


sys.excepthook = _could_not_run
"""


def repro_source(spec: NetSpec, failure: ParityFailure, converter: str, executors: Sequence[str] = ()) -> str:
    """A standalone script (plain torch + thunder): exit 0 when thunderfx matches, 1 when the same failure
    (class, and `ThunderCrash.crash_signature` for a crash; for a time-out, thunderfx still running after the
    recorded limit) reproduces, 2 on anything else.

    ``executors``: thunder's default executors the failure was found with (empty: thunder's own defaults).
    Its header names the installed thunder, torch and converter (`found_with`).
    """
    summary = str(failure).splitlines()[0] if str(failure) else ""
    converter_source = inspect.getsource(meta_preserving) if converter == "fixed" else ""
    return (
        f'"""Repro: {failure.failure_class} ({failure.triage}) of thunderfx against eager PyTorch.\n\n'
        f"Found with {found_with(converter)}.\n"
        f"First observed: {_docstring_safe(summary)}\n"
        "Exit status: 0 thunderfx matches, 1 this failure reproduces, 2 anything else (could not run, another "
        f"failure).\nNeeds only torch{', transformers' if spec.model else ''} and lightning-thunder.\n"
        '"""\n\n'
        + _REPRO_PRELUDE
        + network_source(spec)
        + f"\n\nCONVERTER = {converter!r}\nEXECUTORS = {list(executors)!r}\nRANDOM = {spec.random}\n"
        + f"EXPECTED_CLASS = {failure.failure_class!r}\n"
        + f"EXPECTED_ERROR = {getattr(failure, 'crash_signature', '')!r}\n"
        + f"TIME_LIMIT_S = {failure.limit_s if isinstance(failure, ExampleTimeout) else None!r}\n\n\n"
        + oracle_source()
        + ("\n\n\n" + converter_source if converter_source else "")
        + _REPRO_MAIN
    )


def _docstring_safe(text: str) -> str:
    """``text`` as it can stand inside a triple-quoted docstring."""
    return text.replace("\\", "\\\\").replace('"""', '\\"\\"\\"')


def found_with(converter: str) -> str:
    """The installed thunder and torch, and the converter ``converter`` on them, in words."""
    import thunder
    import torch

    return f"lightning-thunder {thunder.__version__}, torch {torch.__version__}; converter {describe(converter)}"


def oracle_source() -> str:
    """`fuzz.run.passes` then `fuzz.judge.parity`, verbatim but for the latter's import of the former: the oracle
    a repro.py carries."""
    rules = re.sub(r"^from fuzz\.run\.passes import \([^)]*\)\n", "", inspect.getsource(fuzz.judge.parity), flags=re.M)
    assert "from fuzz" not in rules, "fuzz.judge.parity may import nothing of ours but fuzz.run.passes"
    return inspect.getsource(fuzz.run.passes) + "\n\n" + rules
