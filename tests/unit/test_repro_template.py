"""The body of every repro.py is a module (fuzz.report.repro_template) that runs in the package: bound to a network
and a recorded failure, its main gives the exit status the written repro.py gives."""

import inspect

import pytest
import thunder.dynamo.utils

from fuzz.generate.spec import CheckpointSpec, LayerSpec, NetSpec
from fuzz.judge.failures import GradientDivergence
from fuzz.registry.files import recorded_failure, recorded_spec
from fuzz.report import repro_template
from fuzz.report.repro import repro_source

CRASH = "negative-pad-crash"  # thunderfx raises a bare AssertionError on F.pad with negative padding


_BOUND = (
    "CONVERTER",
    "EXECUTORS",
    "RANDOM",
    "EXPECTED_CLASS",
    "EXPECTED_ERROR",
    "TIME_LIMIT_S",
    "DTYPE",
    "DEVICE",
    "_SPEC",
)


@pytest.fixture
def script(monkeypatch):
    """The module, with its bound names and thunder's converter (the fix patches it) restored after the test."""
    converter = thunder.dynamo.utils._checkpoint_function_converter
    monkeypatch.setattr(thunder.dynamo.utils, "_checkpoint_function_converter", converter)
    for name in _BOUND:
        monkeypatch.setattr(repro_template, name, getattr(repro_template, name))
    return repro_template


def test_bound_to_a_recorded_crash_it_reproduces_it(script, capsys):
    script.bind(recorded_spec(CRASH), recorded_failure(CRASH))
    assert script.main() == 1
    assert "REPRODUCED: thunder-crash AssertionError" in capsys.readouterr().out


def test_another_failure_than_the_recorded_one_exits_2(script, capsys):
    script.bind(recorded_spec(CRASH), GradientDivergence("grad of input: max abs diff 1"))
    assert script.main() == 2
    assert (
        "OTHER FAILURE: thunder-crash AssertionError:  where gradient-divergence  was recorded"
        in capsys.readouterr().out
    )


def test_a_network_thunderfx_gets_right_exits_0(script, capsys):
    spec = NetSpec(features=2, layers=[LayerSpec("tanh")], checkpoints=[CheckpointSpec(0, 1)])
    script.bind(spec, GradientDivergence("grad of input: max abs diff 1"))
    assert script.main() == 0
    assert "NOT REPRODUCED: thunderfx matches eager" in capsys.readouterr().out


def test_a_repro_is_the_module_but_its_in_package_definitions():
    source = repro_source(recorded_spec(CRASH), recorded_failure(CRASH), "fixed")
    module = inspect.getsource(repro_template)
    for function in (
        repro_template._verdict,
        repro_template.main,
        repro_template._limited,
        repro_template._could_not_run,
    ):
        assert inspect.getsource(function) in source
    assert inspect.getsource(repro_template.bind) in module and "def bind" not in source and "from fuzz" not in source
    assert "EXPECTED_CLASS = 'thunder-crash'\nEXPECTED_ERROR = 'AssertionError: '" in source
