"""Grad modes inside programs (`LayerSpec.grad_mode`, fuzz.generate.program.grad_blocks): drawn programs with
no_grad, enable_grad, inference_mode and autocast regions are valid and say which outputs need grad as eager does; the
source writes each region as one ``with`` block; eager's rejections across grad modes are validation's; reduction
drops a region before the layers inside it."""

import re
from dataclasses import replace

import pytest
import torch
from hypothesis import HealthCheck, given, settings

from fuzz.generate import program
from fuzz.generate.program_specs import program_specs
from fuzz.generate.program_traits import flow_traits
from fuzz.generate.reduce import _candidates, _without_layer
from fuzz.generate.spec import CheckpointSpec, LayerSpec, NetSpec, SpecError, validate
from fuzz.judge.verdict import check_spec
from fuzz.model_builder import build_example, network_source
from fuzz.run.passes import call_on
from tests.faults import injected


@settings(max_examples=150, database=None, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(program_specs(dtypes=("float32", "float64")))
def test_drawn_programs_with_grad_modes_say_whether_their_output_needs_grad_as_eager_does(spec):
    validate(spec)
    assert NetSpec.from_json(spec.to_json()) == spec
    example = build_example(spec)
    out = call_on(example.net, example.input)
    assert out.requires_grad == program.an_output_requires_grad(spec)
    out.backward(example.cotangent)


def _program(*layers: LayerSpec, checkpoints=(), outputs=None, dtype="float32") -> NetSpec:
    return NetSpec(
        features=3, batch=2, layers=list(layers), checkpoints=list(checkpoints), outputs=outputs, dtype=dtype
    )


def test_consecutive_layers_under_one_mode_are_one_with_block_split_at_a_checkpoint():
    spec = _program(
        LayerSpec("tanh", reads=[0], grad_mode="inference_mode"),
        LayerSpec("clone", reads=[1], grad_mode="inference_mode"),
        LayerSpec("sin", reads=[2], grad_mode="inference_mode"),
        LayerSpec("mul", reads=[3, 0]),
        checkpoints=[CheckpointSpec(2, 3)],
    )
    validate(spec)
    assert program.grad_blocks(spec.layers, spec.checkpoints) == [0, 0, 2, None]
    source = network_source(spec).split("class PlainNet")[0]  # Net: its forward and its region's method
    assert source.count("with torch.inference_mode():") == 2
    assert "v1 = v1.clone()" in source and "v3 = v3.clone()" in source
    example = build_example(spec)
    example.net(example.input).backward(example.cotangent)
    labels = flow_traits(spec)
    assert {"program grad mode inference_mode", "program grad mode inference_mode in a checkpoint"} <= set(labels)


def test_an_autocast_value_a_later_layer_reads_is_cast_back_and_one_only_returned_keeps_autocasts_dtype_for_all():
    linear = {"bias": True, "out_features": 3}
    spec = _program(
        LayerSpec("linear", linear, reads=[0], grad_mode="autocast"),
        LayerSpec("linear", linear, reads=[0], grad_mode="autocast"),
        LayerSpec("tanh", reads=[1]),
        checkpoints=[CheckpointSpec(0, 2)],
        outputs=[2],
    )
    validate(spec)
    source = network_source(spec).split("class PlainNet")[0]
    assert "v1 = v1.to(v0.dtype)" in source and "v2 = v2.to(" not in source
    example = build_example(spec)
    assert call_on(example.net, example.input).dtype == torch.bfloat16  # what shows an ignored autocast (by dtype)
    # Returned beside a float32 value, the float32 one joins in autocast's dtype (torch.cat would promote the mix
    # to float32 in both runs): thunder ignoring autocast in the body still shows.
    mixed = replace(spec, outputs=[2, 3])
    assert "torch.cat([v2.reshape(-1), v3.reshape(-1).to(v2.dtype)])" in network_source(mixed)
    assert call_on(build_example(mixed).net, build_example(mixed).input).dtype == torch.bfloat16
    assert check_spec(mixed).failure is None
    with injected("autocast-in-bodies-ignored"):
        failure = check_spec(mixed).failure
    assert str(failure) == "output: shape/dtype (12,)/torch.float32 != (12,)/torch.bfloat16", failure


@pytest.mark.parametrize(
    ("spec", "problem"),
    [
        (
            _program(LayerSpec("clone", reads=[0]), LayerSpec("mul_", reads=[1], grad_mode="no_grad")),
            "made under another grad mode, in place",
        ),
        (
            _program(LayerSpec("clone", reads=[0], grad_mode="no_grad"),
                     LayerSpec("alias", reads=[1], grad_mode="no_grad"), LayerSpec("mul_", reads=[2])),
            "made under another grad mode, in place",
        ),
        (
            _program(LayerSpec("clone", reads=[0]), LayerSpec("alias", reads=[1], grad_mode="no_grad"),
                     LayerSpec("alias", reads=[2]), LayerSpec("mul_", reads=[3])),
            "made under another grad mode, in place",
        ),
        (_program(LayerSpec("clone", reads=[0]), LayerSpec("mul_", reads=[1], grad_mode="autocast")), "under autocast"),
        (_program(LayerSpec("tanh", reads=[0], grad_mode="autocast"), dtype="float64"), "needs a float32 network"),
        (_program(LayerSpec("tanh", reads=[0], grad_mode="no_grad")), "no output requires grad"),
        (_program(LayerSpec("detach", reads=[0])), "no output requires grad"),
        (_program(LayerSpec("tanh", reads=[0], grad_mode="eval")), "grad_mode must be null"),
        (
            _program(LayerSpec("linear", {"out_features": 3, "bias": True}, reads=[0], grad_mode="inference_mode"),
                     LayerSpec("mul", reads=[1, 0]), checkpoints=[CheckpointSpec(0, 1, selective=True)]),
            "inference_mode inside a selective checkpoint",
        ),
        (NetSpec(features=2, layers=[LayerSpec("tanh", grad_mode="no_grad")]), "grad_mode must be null"),
    ],
    ids=["update-in-no-grad", "view-made-in-no-grad-updated", "view-of-a-no-grad-view-updated", "autocast-update",
         "autocast-float64", "no-output-needs-grad", "detached-output", "unknown-mode", "inference-in-selective",
         "stack"],
)  # fmt: skip
def test_what_eager_rejects_across_grad_modes_is_not_a_valid_program(spec, problem):
    with pytest.raises(SpecError, match=re.escape(problem)):
        validate(spec)


def test_reduction_drops_a_grad_mode_region_before_any_layer_inside_it():
    spec = _program(
        LayerSpec("tanh", reads=[0], grad_mode="no_grad"),
        LayerSpec("sin", reads=[1], grad_mode="no_grad"),
        LayerSpec("mul", reads=[2, 0]),
    )
    validate(spec)
    candidates = [candidate.to_json() for candidate in _candidates(spec)]
    dropped = _program(*(LayerSpec(layer.kind, reads=layer.reads) for layer in spec.layers))
    first_deletion = min(candidates.index(_without_layer(spec, index).to_json()) for index in range(3))
    assert candidates.index(dropped.to_json()) < first_deletion


def test_thunder_failing_inside_an_inference_mode_region_leaves_the_next_example_its_grad_modes():
    """thunder 0.2.6 fails on a ``with torch.inference_mode()`` region (its guard, entered while dynamo traced, stays
    alive in the failure's traceback); the oracle's next network must still run with grad on."""
    spec = _program(LayerSpec("tanh", reads=[0], grad_mode="inference_mode"), LayerSpec("mul", reads=[1, 0]))
    check_spec(spec)
    assert (torch.is_grad_enabled(), torch.is_inference_mode_enabled()) == (True, False)
    assert check_spec(_program(LayerSpec("tanh", reads=[0]), LayerSpec("mul", reads=[1, 0]))).failure is None


@settings(max_examples=60, database=None, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(program_specs(dtypes=("float32",), grad_modes=("no_grad",)), program_specs(grad_modes=()))
def test_a_campaign_focused_on_some_grad_modes_draws_only_those(focused, without):
    assert {layer.grad_mode for layer in focused.layers} <= {None, "no_grad"}
    assert {layer.grad_mode for layer in without.layers} == {None}
