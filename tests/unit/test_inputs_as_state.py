"""A program's inputs as state (`fuzz.generate.flow.INPUT_KINDS`, `INDEXED_KINDS`): further inputs that need grad or
not, inputs that view one another, updated in place by copy, indexed assignment, index_put_ and masked_fill_; eager's
rejections are validation's; the harness keeps inputs' aliasing in every fresh copy and judges each input after the
call (its value, whether it requires grad) and whether the output requires grad, as state."""

import re

import pytest
import torch
from hypothesis import HealthCheck, find, given, settings

from fuzz.campaign.families import PROGRAM, DrawOptions
from fuzz.generate.program_specs import program_specs
from fuzz.generate.program_traits import INDEXED_UPDATE_NAMES, Showing, flow_traits
from fuzz.generate.spec import CheckpointSpec, LayerSpec, NetSpec, SpecError, validate
from fuzz.model_builder import build_example, network_source
from fuzz.run.passes import call_on, cast_input, forward_backward, fresh_input, input_tensors


def _program(*layers: LayerSpec, checkpoints=(), outputs=None) -> NetSpec:
    return NetSpec(features=4, batch=2, layers=list(layers), checkpoints=list(checkpoints), outputs=outputs)


def _state(requires_grad: bool = False) -> LayerSpec:
    return LayerSpec("state_input", {"width": 4, "requires_grad": requires_grad}, reads=[0])


_VIEW = LayerSpec("input_view", {"start": 1, "length": 2}, reads=[1])

# v1 (no grad), v2 = v1[:, 1:3] (another argument), v1 *= 0.5 (seen through v2), v1.copy_(x) (v1 now needs grad),
# then x + v1 and v2 returned.
STATE_PROGRAM = _program(
    _state(),
    _VIEW,
    LayerSpec("mul_", reads=[1]),
    LayerSpec("copy_", reads=[3, 0]),
    LayerSpec("add", reads=[0, 4]),
    outputs=[5, 2],
)


@settings(max_examples=100, database=None, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(program_specs(dtypes=("float32", "float64")))
def test_drawn_programs_with_several_inputs_run_eagerly_and_keep_their_inputs_aliasing(spec):
    validate(spec)
    assert NetSpec.from_json(spec.to_json()) == spec
    example = build_example(spec)
    inputs = fresh_input(example.input)
    for fresh, made in zip(input_tensors(inputs), input_tensors(example.input), strict=True):
        assert (fresh.shape, fresh.stride(), fresh.requires_grad) == (made.shape, made.stride(), made.requires_grad)
        assert (fresh._base is None) == (made._base is None)  # a view of another input is one again
    out = call_on(example.net, inputs)
    assert out.requires_grad  # (an update may give an input grad that the program then returns: never the converse)
    out.backward(example.cotangent)  # eager accepts every update the program makes of its inputs


@pytest.mark.parametrize(
    "label",
    [
        "program several inputs",
        "program input needing no grad",
        "program inputs viewing one another",
        "program update of an input",
        # (each about one program in 250: 10 to 30 s to find, in make test-full)
        pytest.param("program two updates of one input", marks=pytest.mark.slow),
        pytest.param("program input given grad by an update", marks=pytest.mark.slow),
        *(f"program indexed update {name}" for name in sorted(INDEXED_UPDATE_NAMES)),
    ],
)
def test_the_strategy_reaches_each_structure_of_inputs_as_state(label):
    find(
        program_specs(dtypes=("float32",)),
        lambda spec: label in flow_traits(spec),
        settings=settings(max_examples=3000, database=None, suppress_health_check=list(HealthCheck)),
    )


@pytest.mark.parametrize(
    "structures", [("program update of an input",), ("program inputs viewing one another", "program several outputs")]
)
def test_a_campaign_asked_for_structures_draws_only_programs_showing_them(structures):
    # (About 7 % of programs update an input and 20 % have an input viewing another: 40 unfiltered draws miss.)
    @settings(max_examples=40, database=None, suppress_health_check=list(HealthCheck), deadline=None)
    @given(PROGRAM.strategy(DrawOptions(dtypes=("float32",), structures=structures)))
    def drawn(spec: NetSpec) -> None:
        assert set(structures) <= set(flow_traits(spec)), flow_traits(spec)

    drawn()


def test_a_structure_the_options_rule_out_ends_the_draw_with_a_reason():
    # (Without catalog nodes a program has one input: drawing on would run nothing until the budget ends.)
    @settings(max_examples=5, database=None, suppress_health_check=list(HealthCheck), deadline=None)
    @given(program_specs(catalog_nodes=False).filter(Showing(("program several inputs",), patience=50)))
    def drawn(spec: NetSpec) -> None:
        raise AssertionError(f"drawn without further inputs: {spec.to_json()}")

    with pytest.raises(ValueError, match="none of the first 50 programs drawn showed it"):
        drawn()


def test_a_structure_once_shown_never_ends_the_draw():
    # (Hypothesis's shrinking tries many candidates without it: none may turn a finding into an error.)
    showing, plain = (
        Showing(("program several inputs",), patience=2),
        NetSpec(features=1, layers=[LayerSpec("clone", reads=[0])]),
    )
    assert showing(STATE_PROGRAM)
    assert not any([showing(plain) for _ in range(5)])


def test_an_input_view_is_another_argument_sharing_its_inputs_memory():
    validate(STATE_PROGRAM)
    source = network_source(STATE_PROGRAM)
    assert "def forward(self, x, v1, v2):" in source and "v2 = v1[:, 1:3]" in source
    x, s1, s2 = fresh_input(build_example(STATE_PROGRAM).input)
    assert s2._base is s1 and s2.data_ptr() == s1.data_ptr() + 4
    assert cast_input((x, s1, s2), torch.float64)[2]._base is not None


def test_each_input_after_the_call_and_whether_it_requires_grad_are_state():
    example = build_example(STATE_PROGRAM)
    inputs = fresh_input(example.input)
    before = [t.detach().clone() for t in inputs]
    output, results = forward_backward(example.net, example.net, inputs, example.cotangent)
    torch.testing.assert_close(results["input 1 after forward"], before[0])  # s1 = x after the copy
    torch.testing.assert_close(results["input 2 after forward"], before[0][:, 1:3])
    assert results["input 1 requires grad after forward"].item() == 1.0  # given grad by the copy
    assert results["input 2 requires grad after forward"].item() == 1.0  # a view of it
    assert results["input requires grad after forward"].item() == 1.0
    assert results["output requires grad after forward"].item() == 1.0
    assert results["input 1"] is None and results["input"] is not None  # (s1 is no leaf any more)


def _eager_rejects(spec: NetSpec) -> None:
    example = build_example(spec)
    with pytest.raises(RuntimeError):
        call_on(example.net, fresh_input(example.input)).backward(example.cotangent)


@pytest.mark.parametrize(
    ("spec", "problem", "eager_rejects"),
    [
        (_program(_state(True), LayerSpec("mul_", reads=[1]), LayerSpec("add", reads=[0, 0])),
         "which requires grad, in place", True),
        (_program(_state(True), LayerSpec("input_view", {"start": 0, "length": 2}, reads=[1]),
                  LayerSpec("mul_", reads=[2]), LayerSpec("add", reads=[0, 0])), "which requires grad, in place", True),
        (_program(_state(), _VIEW, LayerSpec("copy_", reads=[1, 0]), LayerSpec("mul_", reads=[2]),
                  LayerSpec("add", reads=[0, 3])), "a view made before an update of its memory gave it grad", True),
        (_program(_state(), LayerSpec("tanh", reads=[1]), checkpoints=[CheckpointSpec(0, 1)]),
         "an input is an argument", False),
        (_program(LayerSpec("clone", reads=[0]), LayerSpec("input_view", {"start": 0, "length": 2}, reads=[1])),
         "which is not an input", False),
        (_program(_state(), LayerSpec("copy_", reads=[1, 1]), LayerSpec("add", reads=[0, 2])), None, False),
    ],
    ids=["update-input-needing-grad", "update-view-of-input-needing-grad", "stale-view-after-grad-given",
         "input-in-a-checkpoint", "input-view-of-a-value", "copy-from-itself-is-valid"],
)  # fmt: skip
def test_what_eager_rejects_of_inputs_as_state_is_not_a_valid_program(spec, problem, eager_rejects):
    if problem is None:
        validate(spec)
        return
    with pytest.raises(SpecError, match=re.escape(problem)):
        validate(spec)
    if eager_rejects:
        _eager_rejects(spec)
