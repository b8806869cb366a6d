"""The per-example time limit stops the example, never process-wide initialisation half-way."""

import subprocess
import sys
import time
from dataclasses import replace

import pytest

from fuzz.judge.failures import ExampleTimeout
from fuzz.registry.files import recorded_spec
from fuzz.report.repro import repro_source
from fuzz.run.runner import Deadline, time_limit
from tests.campaign_runs import ROOT
from tests.faults import busy


def _as_if_in_module(name: str):
    """`busy` with globals of module ``name``: its frames look like that module's code."""
    return type(busy)(busy.__code__, {"__name__": name, "time": time}, "busy")


def test_the_limit_interrupts_ordinary_code():
    start = time.monotonic()
    with pytest.raises(Deadline), time_limit(0.2):
        busy(5)
    assert time.monotonic() - start < 1


def test_the_limit_waits_for_inductor_to_finish_compiling():
    finished = []
    start = time.monotonic()
    with pytest.raises(Deadline), time_limit(0.2):
        _as_if_in_module("torch._inductor.compile_fx")(0.6)
        finished.append(time.monotonic() - start)
        busy(5)
    assert finished and finished[0] >= 0.6
    assert time.monotonic() - start < 1.5


def test_the_limit_waits_for_an_import_to_finish(tmp_path, monkeypatch):
    source = "import time\nend = time.monotonic() + 0.6\nwhile time.monotonic() < end:\n    pass\n"
    (tmp_path / "slow_to_import.py").write_text(source)
    monkeypatch.syspath_prepend(tmp_path)
    with pytest.raises(Deadline), time_limit(0.2):
        import slow_to_import  # noqa: F401

        busy(5)
    assert "slow_to_import" in sys.modules
    monkeypatch.delitem(sys.modules, "slow_to_import")


def test_a_long_inductor_compile_outlives_the_hard_limit_but_not_twice():
    # In a child, as the watchdog of the hard limit (2 x 2 + 10 = 14 s) exits the process.
    script = (
        "import time\n"
        "from fuzz.run.runner import Deadline, time_limit\n"
        "from tests.unit.test_time_limit import _as_if_in_module, busy\n"
        "for busy_s in (15, 60):\n"
        "    start = time.monotonic()\n"
        "    try:\n"
        "        with time_limit(2):\n"
        "            _as_if_in_module('torch._inductor.codecache')(busy_s)\n"
        "            busy(5)\n"
        "    except Deadline:\n"
        "        print(time.monotonic() - start)\n"
    )
    child = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert child.returncode == 0, child.stderr[-2000:]
    finished, interrupted = map(float, child.stdout.split())
    assert 15 <= finished < 15.5  # waited for, past the hard limit: the watchdog restarts while the alarm waits
    assert 16 <= interrupted < 17  # a wait is at most another hard limit (2 + 14 s)


def _run_repro(directory, spec, limit_s: float) -> tuple[int, str, float]:
    """Exit status, last line of output and seconds of the repro.py of a time-out of ``spec`` after ``limit_s``."""
    (directory / "repro.py").write_text(repro_source(spec, ExampleTimeout.after(limit_s), "fixed"))
    start = time.monotonic()
    ran = subprocess.run(
        [sys.executable, "repro.py"], cwd=directory, capture_output=True, text=True, timeout=240, check=False
    )
    return ran.returncode, (ran.stdout.strip().splitlines() or [""])[-1], time.monotonic() - start


def test_a_time_outs_repro_exits_1_once_thunderfx_runs_past_its_limit_and_0_when_it_finishes(tmp_path):
    """Bisecting a time-out needs its repro to say "reproduced" (thunder takes minutes on reentrant checkpoints)."""
    hangs = recorded_spec("reentrant-checkpoint-unsupported")
    status, said, seconds = _run_repro(tmp_path, hangs, 3)
    assert (status, said) == (1, "REPRODUCED: timeout (thunderfx ran past the time limit of 3 s)")
    assert seconds < 90  # imports and a warm-up compile, then 3 s of thunderfx: not thunder's minutes
    finishes = replace(hangs, checkpoints=[replace(c, use_reentrant=False) for c in hangs.checkpoints])
    status, said, _ = _run_repro(tmp_path, finishes, 120)
    assert (status, said) == (0, "NOT REPRODUCED: thunderfx matches eager")
