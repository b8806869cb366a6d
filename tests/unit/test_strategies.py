"""The strategies draw valid specs that round-trip through JSON and shrink toward the smallest network."""

import contextlib
import json
from dataclasses import replace

import pytest
from hypothesis import HealthCheck, Phase, find, given, settings
from hypothesis.database import InMemoryExampleDatabase

from fuzz.generate.draws import checkpoints_from_placements
from fuzz.generate.layers import LAYER_KINDS
from fuzz.generate.reduce import reduce_spec
from fuzz.generate.spec import CheckpointSpec, LayerSpec, NetSpec, SpecError, validate
from fuzz.model_builder import build_example
from fuzz.run.runner import run_eager, run_reference
from fuzz.strategies import net_specs

_FAST = settings(max_examples=200, database=None, suppress_health_check=[HealthCheck.too_slow])


@_FAST
@given(net_specs())
def test_specs_are_valid_and_round_trip_through_json(spec):
    validate(spec)
    assert NetSpec.from_json(spec.to_json()) == spec
    covered = [i for c in spec.checkpoints for i in range(c.start, c.stop)]
    assert len(covered) == len(set(covered)), "checkpoint segments overlap"
    assert spec.widths()[0] == spec.features and len(spec.widths()) == len(spec.layers) + 1


def _has_checkpointed(kind: str):
    return lambda spec: any(layer.kind == kind and spec.checkpointed(i) for i, layer in enumerate(spec.layers))


@pytest.mark.parametrize("kind", ["tanh", "layer_norm", "mlp", "residual"])
def test_shrinks_to_that_one_layer_inside_one_checkpoint_at_the_smallest_dims(kind):
    # What a failure's repro gets: Hypothesis's shrinking, then the spec-level reduction, which
    # removes the leading linear(1 -> 1) layers the shrinker sometimes stops at.
    predicate = _has_checkpointed(kind)
    shrunk = find(net_specs(), predicate, settings=settings(database=None, max_examples=2000, derandomize=True))
    assert (shrunk.features, shrunk.batch, shrunk.seq, shrunk.dtype, shrunk.seed) == (1, 1, None, "float32", 0)
    assert len(shrunk.layers) <= 3
    smallest = reduce_spec(shrunk, predicate)
    assert len(smallest.layers) == 1 and smallest.layers[0].kind == kind
    assert [(c.start, c.stop, c.api) for c in smallest.checkpoints] == [(0, 1, "checkpoint")]
    assert all(v in (1, False, "relu") for v in smallest.layers[0].params.values())


def test_shrinks_toward_fewer_checkpoints():
    two_layers = find(net_specs(), lambda s: len(s.layers) >= 2, settings=settings(database=None))
    assert len(two_layers.layers) == 2 and two_layers.checkpoints == []


def _spec_json(**changes) -> str:
    data = NetSpec(features=2, layers=[LayerSpec("linear", {"out_features": 3, "bias": False})]).to_dict()
    data.update(changes)
    return json.dumps(data)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{", "spec is not valid JSON"),
        ("[]", "a spec must be a JSON object, got list"),
        (_spec_json(dtype="float8"), "dtype 'float8' is not one of float32, float64"),
        (_spec_json(device="tpu"), "device 'tpu' is not one of cpu, cuda"),
        (_spec_json(features=0), "features must be a positive integer, got 0"),
        (_spec_json(layers=[{"kind": "conv9"}]), "layers[0]: unknown kind 'conv9'"),
        (_spec_json(layers=[{"kind": "pool"}]), "layers[0] (pool): a channels layer cannot take an input of shape"),
        (_spec_json(spatial=[4, 0]), "spatial must be null or a list of 1 to 3 positive integers"),
        (_spec_json(layers=[{"kind": "linear", "params": {"out_features": 2}}]), "params must be exactly"),
        (_spec_json(layers=[{"kind": "linear", "params": {"out_features": 0, "bias": 1}}]), "invalid out_features=0"),
        (_spec_json(checkpoints=[{"start": 0, "stop": 2}]), "segment [0, 2) is not inside the 1 layers"),
        (_spec_json(colour="red"), "malformed spec"),
        (_spec_json(version=9), "spec version 9 is not supported"),
        (_spec_json(autocast="everywhere"), "autocast 'everywhere' is not one of"),
        (_spec_json(autocast="forward", dtype="float16"), "autocast needs a float32 network"),
        (_spec_json(autocast="checkpoints"), "autocast 'checkpoints' needs a checkpoint of api 'checkpoint'"),
        (
            _spec_json(checkpoints=[{"start": 0, "stop": 1, "use_reentrant": True, "extra_args": True}]),
            "use_reentrant=True takes no keyword arguments",
        ),
        (
            _spec_json(checkpoints=[{"start": 0, "stop": 1, "api": "wrapper", "multi_output": True}]),
            "extra_args and multi_output need api 'checkpoint'",
        ),
        (
            _spec_json(
                layers=[
                    {"kind": "dropout", "params": {"p": "0.5"}},
                    {"kind": "linear", "params": {"out_features": 1, "bias": True}},
                ],
                checkpoints=[{"start": 0, "stop": 1, "preserve_rng_state": False}],
            ),
            "preserve_rng_state=False with a random layer inside",
        ),
        (_spec_json(inputs="zeros"), "inputs 'zeros' is not one of random, ones"),
        (_spec_json(inputs="ones", vocab=1), "inputs 'ones' feeds token 1: vocab must be at least 2"),
    ],
)
def test_malformed_specs_get_a_one_line_error_naming_the_field(text, message):
    with pytest.raises(SpecError) as error:
        NetSpec.from_json(text)
    assert message in str(error.value) and "\n" not in str(error.value)


@pytest.mark.parametrize(
    ("placements", "segments"),
    [
        ([], []),
        (["outside", "outside"], []),
        (["inside"], [(0, 1)]),
        (["new", "inside", "inside", "outside", "inside", "new"], [(0, 3), (4, 5), (5, 6)]),
        (["outside", "inside", "new", "inside"], [(1, 2), (2, 4)]),
    ],
)
def test_per_layer_placements_become_segments(placements, segments):
    layers = [LayerSpec("relu")] * len(placements)
    placed = [(role, CheckpointSpec(0, 8)) for role in placements]
    assert checkpoints_from_placements(placed, layers) == [CheckpointSpec(a, b) for a, b in segments]


def test_checkpoint_options_are_resolved_to_what_each_api_accepts():
    layers = [LayerSpec("linear_relu_inplace", {"out_features": 2}), LayerSpec("sin"), LayerSpec("relu")]
    everything = CheckpointSpec(0, 8, selective=True, nested=True, determinism_check="none", segments=5)
    wrapper, sequential = replace(everything, api="wrapper"), replace(everything, api="sequential")
    resolved = checkpoints_from_placements([("new", wrapper), ("inside", wrapper), ("new", wrapper)], layers)
    # A wrapper needs exactly one module layer; in-place layers rule out selective checkpointing.
    assert resolved[0] == CheckpointSpec(0, 2, determinism_check="none", nested=True)
    assert resolved[1] == CheckpointSpec(2, 3, api="wrapper", selective=True, determinism_check="none")
    (seq,) = checkpoints_from_placements([("new", sequential), ("inside", sequential), ("inside", sequential)], layers)
    assert seq == CheckpointSpec(0, 3, api="sequential", segments=3)
    reentrant = replace(everything, use_reentrant=True, extra_args=True, multi_output=True)
    (plain,) = checkpoints_from_placements([("new", reentrant)], layers[1:2])
    assert plain == CheckpointSpec(0, 1, use_reentrant=True, nested=True, multi_output=True)
    unpreserved = replace(everything, preserve_rng_state=False)
    (dropout,) = checkpoints_from_placements([("new", unpreserved)], [LayerSpec("dropout", {"p": "0.5"})])
    assert dropout.preserve_rng_state  # eager's own recomputation would otherwise draw another mask


@_FAST
@given(net_specs(kinds=["linear", "dropout", "relu"]))
def test_random_networks_never_use_checkpoint_sequential(spec):
    # Dynamo never compiles it, so the network would draw eager's random stream (see fuzz.judge.verdict).
    assert not (spec.random and any(c.api == "sequential" for c in spec.checkpoints))


# The kinds the mutation and image families added (issue 14): drawn alone, images half the time.
NEW_KINDS = [
    name for name, kind in LAYER_KINDS.items() if kind.layout == "channels" or kind.inplace and kind.layout == "any"
]


@pytest.mark.parametrize("kinds", [None, NEW_KINDS], ids=["all", "mutation-and-images"])
def test_every_drawn_spec_builds_and_runs_eagerly_with_and_without_its_checkpoints(kinds):
    @settings(max_examples=300, database=None, derandomize=True, deadline=None, suppress_health_check=list(HealthCheck))
    @given(net_specs(kinds=kinds))
    def builds_and_runs(spec):
        # Valid by construction: an eager error here is a generator bug (the harness would raise it too).
        for checkpointing in (True, False):
            example = build_example(spec, checkpointing)
            run_eager(example)
            run_reference(example)

    builds_and_runs()


# The registry's order as of this test: kinds are only ever appended (fuzz/generate/layers.py says why).
_REGISTERED_ORDER = (
    "linear relu tanh sigmoid gelu gelu_tanh silu elu leaky_relu softplus hardswish hardtanh mish selu softsign "
    "logsigmoid layer_norm rms_norm mlp residual swiglu dropout attention transformer_block matmul gram "
    "linear_relu_inplace linear_silu_inplace inplace_residual softmax log_softmax center sum_normalize sub_amax "
    "batch_center masked_fill where sin gaussian rsqrt soft_abs abs clamp transpose_contiguous permute_contiguous "
    "fold_transpose chunk_swap split_swap roll_slices narrow_swap op op_module decoder_block view_update "
    "input_update buffer_update conv pool batch_norm group_norm instance_norm upsample pixel_shuffle channels_last "
    "conv_block unet_block"
).split()


def test_layer_kinds_are_only_ever_appended():
    assert list(LAYER_KINDS)[: len(_REGISTERED_ORDER)] == _REGISTERED_ORDER


_SAVED_KINDS = ("linear", "relu", "tanh", "gelu", "layer_norm", "residual")


@pytest.mark.parametrize("where", ["appended", "inserted first"])
def test_a_saved_failure_replays_to_the_same_network_after_a_kind_is_added(where):
    database, seen = InMemoryExampleDatabase(), []

    def two_layers_ending_in_tanh_fail(spec):
        seen.append(spec)
        assert not (len(spec.layers) >= 2 and spec.layers[-1].kind == "tanh")

    def run(kinds, **options):
        # The same function under both: the same database key, as a test keeps it across a change of the registry.
        test = given(net_specs(device="cpu", kinds=kinds))(two_layers_ending_in_tanh_fail)
        settings(database=database, suppress_health_check=list(HealthCheck), **options)(test)()

    with pytest.raises(AssertionError):
        run(_SAVED_KINDS, max_examples=500)
    saved = seen[-1]  # Hypothesis's last call replays the shrunk failure it saved
    seen.clear()
    # A new kind that takes every input (relu's twin), put into the registry itself.
    added = replace(LAYER_KINDS["relu"], name="added_kind")
    registry = dict(LAYER_KINDS)
    new_order = {**registry, added.name: added} if where == "appended" else {added.name: added, **registry}
    LAYER_KINDS.clear()
    LAYER_KINDS.update(new_order)
    try:
        with contextlib.suppress(AssertionError):
            run((*_SAVED_KINDS, added.name), phases=[Phase.reuse], max_examples=1)
    finally:
        LAYER_KINDS.clear()
        LAYER_KINDS.update(registry)
    if where == "appended":
        assert seen and seen[0] == saved, (saved, seen)
    else:  # the control: a kind inserted before the others shifts what each saved choice names; this test sees it
        assert seen and saved not in seen
