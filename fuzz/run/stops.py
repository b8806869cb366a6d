"""Stopping a run on SIGINT or SIGTERM: the signal handler records the stop; the run acts on it where that is safe.

A KeyboardInterrupt raised wherever the signal landed was lost in a weakref callback during garbage collection (Python
printed its traceback and dropped it) or left thunder's state half-built. So inside a campaign's test item
(`at_safe_points`) the handler only records the stop, and the item raises KeyboardInterrupt at its next safe point
(`stop_if_interrupted`: each example, each phase of a run, each reduction step, each poll of a confirmation). The wait
is bounded: a thunderfx run under `fuzz.run.runner.time_limit` has its alarm cut to `STOP_GRACE_S` and ends as a
time-out would (waiting, as a time-out does, while inductor compiles or a module is imported, up to the hard limit,
which also ends a stuck native call); an eager pass (no time limit) is seconds. Elsewhere (pytest's own code, a
self-test, xdist's controller) the handler raises at once, unless the exception would be lost there
(`raising_is_lost`): it then asks again `RETRY_S` later.
"""

from __future__ import annotations

import contextlib
import gc
import os
import signal
import threading
import time
from collections.abc import Iterator

STOP_GRACE_S = 1.0
RETRY_S = 0.1

# Plain values, no threading.Event: a second signal can run the handler inside its first call, and taking an Event's
# lock there again would deadlock. "safe_points" and "alarms" count the open `at_safe_points` and `alarm_cut_by_a_stop`
# blocks; "retry" is the pipe that wakes `_retry`.
_stop: dict = {"signal": None, "raised": False, "deferred": False, "safe_points": 0, "alarms": 0, "retry": None}
_collection = {"running": False}


def _note_collection(phase: str, info: dict) -> None:
    _collection["running"] = phase == "start"


gc.callbacks.append(_note_collection)


def raising_is_lost(frame) -> bool:
    """Whether an exception raised in ``frame`` would be printed and dropped by Python: while the garbage collector
    runs (its weakref callbacks and finalizers), in a finalizer (``__del__``) or in the standard library's weakref
    callbacks (`weakref.finalize`, weak containers)."""
    if _collection["running"]:
        return True
    while frame is not None:
        code = frame.f_code
        if code is _note_collection.__code__ or code.co_name == "__del__":
            return True
        if frame.f_globals.get("__name__") in ("weakref", "_weakrefset"):
            return True
        frame = frame.f_back
    return False


def interrupt(signum: int, frame) -> None:
    """The signal handler (`install_stop_handler`): records the stop (`interrupted`) and, the first time, cuts a
    `time_limit`'s alarm to `STOP_GRACE_S`. Raises KeyboardInterrupt only outside `at_safe_points`, where the exception
    is not lost (else `_retry` asks again), before `defer_interrupts`, and only once: `timeout`, Slurm and Kubernetes
    signal the controller and then its whole group, and a second KeyboardInterrupt landing in pytest's handling of
    the first escaped it (the summary said "passed" and the process died in a traceback)."""
    if _stop["signal"] is None:
        _stop["signal"] = signum
        if _stop["alarms"] and signal.getitimer(signal.ITIMER_REAL)[0] > STOP_GRACE_S:
            signal.setitimer(signal.ITIMER_REAL, STOP_GRACE_S)
    if _stop["raised"] or _stop["deferred"] or _stop["safe_points"]:
        return
    if raising_is_lost(frame):
        if _stop["retry"] is not None:
            os.write(_stop["retry"], bytes([signum]))
        return
    _stop["raised"] = True
    raise KeyboardInterrupt(f"signal {signum}")


def _retry(read: int) -> None:
    """Signal the main thread again `RETRY_S` after the handler could not raise where a signal landed (a signal, not
    `_thread.interrupt_main`: it also ends a blocking wait there)."""
    while signum := os.read(read, 1):
        time.sleep(RETRY_S)
        signal.pthread_kill(threading.main_thread().ident, signum[0])


def install_stop_handler() -> None:
    """Make SIGINT and SIGTERM stop the run (`interrupt`): a job scheduler's SIGTERM ends it like Ctrl-C, Hypothesis
    keeps what it saved and pytest still writes the summary."""
    if _stop["retry"] is None:
        read, _stop["retry"] = os.pipe()
        threading.Thread(target=_retry, args=(read,), name="fuzz-stop-retry", daemon=True).start()
    for stop in (signal.SIGINT, signal.SIGTERM):
        signal.signal(stop, interrupt)


def stop_if_interrupted() -> None:
    """A safe point: raise KeyboardInterrupt once a signal stopped the run (not after `defer_interrupts`)."""
    if _stop["signal"] is not None and not _stop["deferred"]:
        _stop["raised"] = True
        raise KeyboardInterrupt(f"the run was stopped (signal {_stop['signal']})")


@contextlib.contextmanager
def at_safe_points() -> Iterator[None]:
    """A block that no signal interrupts: it stops at its safe points (`stop_if_interrupted`), its end being one."""
    _stop["safe_points"] += 1
    try:
        yield
    finally:
        _stop["safe_points"] -= 1
    stop_if_interrupted()


@contextlib.contextmanager
def alarm_cut_by_a_stop() -> Iterator[None]:
    """Around a `fuzz.run.runner.time_limit` block whose alarm is set: a stop cuts the alarm to `STOP_GRACE_S`."""
    _stop["alarms"] += 1
    try:
        yield
    finally:
        _stop["alarms"] -= 1


def defer_interrupts() -> None:
    """From now on a signal only marks the run interrupted: what is being written (the summary) is written whole."""
    _stop["deferred"] = True


def interrupted() -> bool:
    """Whether a signal stopped the run: thunder's interpreter may have wrapped its KeyboardInterrupt in an error."""
    return _stop["signal"] is not None
