"""The per-example time limit stops the example, never process-wide initialisation half-way."""

import sys
import time

import pytest

from fuzz.runner import Deadline, time_limit


def _busy(seconds: float) -> str:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        pass
    return "finished"


def _as_if_in_module(name: str):
    """`_busy` with globals of module ``name``: its frames look like that module's code."""
    return type(_busy)(_busy.__code__, {"__name__": name, "time": time}, "busy")


def test_the_limit_interrupts_ordinary_code():
    start = time.monotonic()
    with pytest.raises(Deadline), time_limit(0.2):
        _busy(5)
    assert time.monotonic() - start < 1


def test_the_limit_waits_for_inductor_to_finish_compiling():
    finished = []
    start = time.monotonic()
    with pytest.raises(Deadline), time_limit(0.2):
        finished.append(_as_if_in_module("torch._inductor.compile_fx")(0.6))
        _busy(5)
    assert finished == ["finished"]
    assert 0.6 <= time.monotonic() - start < 1.5


def test_the_limit_waits_for_an_import_to_finish(tmp_path, monkeypatch):
    source = "import time\nend = time.monotonic() + 0.6\nwhile time.monotonic() < end:\n    pass\n"
    (tmp_path / "slow_to_import.py").write_text(source)
    monkeypatch.syspath_prepend(tmp_path)
    with pytest.raises(Deadline), time_limit(0.2):
        import slow_to_import  # noqa: F401

        _busy(5)
    assert "slow_to_import" in sys.modules
    monkeypatch.delitem(sys.modules, "slow_to_import")
