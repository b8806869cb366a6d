"""thunderfx's runs inside one verdict: each under the per-example limit and a deadline, a time-out run once more,
thunder's errors told from ours."""

from __future__ import annotations

import math
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import fuzz.fix
from fuzz.fix import use_converter
from fuzz.judge.failures import ExampleTimeout, ParityFailure, ThunderCrash
from fuzz.judge.outcome import VERDICT_CUT
from fuzz.model_builder import Example
from fuzz.run.runner import CompileReport, Deadline, HarnessError, TimeLimit, run_thunderfx, time_limit
from fuzz.run.stops import interrupted

ThunderRun = tuple[tuple | None, CompileReport | None, ParityFailure | None]

# Our code that thunder calls while it compiles: the fix's wrapper around its converter. (The
# network's code, fuzz/generate/layers.py and the like, is not ours here: thunder interprets it, and a torch
# op that rejects thunder's proxies raises from the network's frame. The harness's steps around
# thunder's run raise `HarnessError` themselves: `fuzz.run.runner.ours`.)
_OUR_CODE_IN_THUNDER = Path(fuzz.fix.__file__)


def _raised_by_our_code_in_thunder(error: BaseException) -> traceback.FrameSummary | None:
    """The frame of ours that raised ``error`` while thunder ran (see `_OUR_CODE_IN_THUNDER`), or None."""
    frames = traceback.extract_tb(error.__traceback__)
    return frames[-1] if frames and Path(frames[-1].filename) == _OUR_CODE_IN_THUNDER else None


def drop_inductor_code_caches() -> None:
    """Forget inductor's in-memory compiled code after a time-out.

    A limit that ran out inside inductor (after the alarm's grace, `fuzz.run.runner.time_limit`) leaves its C++ build
    thread running; our next dynamo reset clears the timing dict that thread writes to, and the build's
    ``KeyError: 'compile_file'`` stays in the code cache: every later network using that kernel "crashed" (seen on
    a loaded machine in the dead-worker self-test, as a thunder-crash no fresh interpreter reproduced).
    """
    import torch._inductor.utils

    torch._inductor.utils.clear_caches()


def run_thunder(example: Example, converter: str, timeout_s: float | None, run: Callable = run_thunderfx) -> ThunderRun:
    """``run(example)`` (thunderfx's run) with ``converter`` under ``timeout_s``: (result, compile report, None), or
    (None, None, the failure: a time-out or thunder's crash); an error raised by our code inside thunder is a
    `HarnessError`."""
    limit = TimeLimit(timeout_s)
    try:
        with use_converter(converter), time_limit(timeout_s) as limit:
            result, report = run(example)
    except Deadline:
        drop_inductor_code_caches()
        return None, None, ExampleTimeout.after(timeout_s)
    except HarnessError:
        raise
    except Exception as error:
        if interrupted():  # the run is being stopped; thunder's interpreter wrapped the KeyboardInterrupt
            raise KeyboardInterrupt("interrupted while thunder ran") from error
        if limit.expired:  # thunder's interpreter re-raised our Deadline as an error of its own
            drop_inductor_code_caches()
            return None, None, ExampleTimeout.after(timeout_s)
        if frame := _raised_by_our_code_in_thunder(error):
            raise HarnessError.of(error, frame.name) from error
        return None, None, ThunderCrash.of(error)
    return result, report, None


class VerdictCut(BaseException):
    """A thunderfx run inside a verdict ran out at the deadline, not at its own limit (`ThunderRuns`). Not an
    `Exception`: no handler of errors on its way to `check_spec` (`fuzz.run.runner.ours`) may take it for one."""


@dataclass
class ThunderRuns:
    """Runs thunderfx under the per-example limit; with ``rerun_timeouts`` a run over it is run once more.

    A time-out counts only when the second run in this process is over the limit too: the first
    may have paid the process's one-off costs (measured: inductor's first compile of thunderfx's
    fallback, imports and pattern set-up included, 8-17 s on a network that then takes 1 s) or a
    burst of load from other processes. A real hang hangs twice.
    No run starts after ``deadline`` (`time.monotonic`) and each is limited by what is left before it (the example's,
    its triage, one precision up, the memory contract, the stock converter, a twin); one that would start after it, or
    that the deadline ended, raises `VerdictCut`. (A limit that ends inside inductor's C++ build waits for the build:
    `fuzz.run.runner.time_limit`.)
    """

    timeout_s: float | None
    rerun_timeouts: bool
    deadline: float = math.inf
    reruns: int = 0
    first: ThunderRun | None = None  # what the first call returns without running (`check_spec`'s ``first_run``)
    found: str | None = None  # what the verdict had found when a run was cut, in words (`cut_reason`)

    def __call__(self, example: Example, converter: str, run: Callable = run_thunderfx) -> ThunderRun:
        if self.first is not None:
            first, self.first = self.first, None
            return first
        result = self._run(example, converter, run)
        if self.rerun_timeouts and isinstance(result[2], ExampleTimeout):
            self.reruns += 1
            result = self._run(example, converter, run)
        return result

    def _run(self, example: Example, converter: str, run: Callable) -> ThunderRun:
        limit_s = self.timeout_s
        if not math.isinf(self.deadline):
            if (left_s := self.deadline - time.monotonic()) <= 0:
                raise VerdictCut
            limit_s = min(limit_s or math.inf, left_s)
        result = run_thunder(example, converter, limit_s, run)
        if isinstance(result[2], ExampleTimeout) and limit_s != self.timeout_s:
            raise VerdictCut
        return result

    def cut_reason(self) -> str:
        """The invalid reason of a verdict the deadline cut short."""
        if self.found is None:
            return VERDICT_CUT
        return f"{VERDICT_CUT} (thunderfx had failed: {self.found})"
