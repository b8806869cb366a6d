"""The spec-level reduction that follows Hypothesis's shrinking."""

from fuzz.reduce import reduce_spec
from fuzz.spec import CheckpointSpec, LayerSpec, NetSpec


def _has_checkpointed_tanh(spec: NetSpec) -> bool:
    return any(layer.kind == "tanh" and spec.checkpointed(i) for i, layer in enumerate(spec.layers))


def test_deletes_layers_and_checkpoints_that_the_failure_does_not_need():
    # The local minimum Hypothesis's shrinker sometimes stops in, plus more to remove.
    spec = NetSpec(
        features=1,
        layers=[LayerSpec("linear", {"out_features": 1, "bias": False}), LayerSpec("relu"), LayerSpec("tanh")],
        checkpoints=[CheckpointSpec(0, 1), CheckpointSpec(1, 3)],
    )
    reduced = reduce_spec(spec, _has_checkpointed_tanh)
    assert reduced == NetSpec(features=1, layers=[LayerSpec("tanh")], checkpoints=[CheckpointSpec(0, 1)])


def test_keeps_what_the_failure_needs_and_never_builds_an_invalid_spec():
    spec = NetSpec(
        features=2,
        layers=[LayerSpec("linear", {"out_features": 3, "bias": True}), LayerSpec("tanh")],
        checkpoints=[CheckpointSpec(0, 2)],
    )
    needs_linear = lambda s: _has_checkpointed_tanh(s) and any(layer.kind == "linear" for layer in s.layers)  # noqa: E731
    assert reduce_spec(spec, needs_linear) == spec


def test_goes_back_to_the_plain_input_when_the_failure_does_not_need_the_embedding():
    spec = NetSpec(features=1, layers=[LayerSpec("tanh")], checkpoints=[CheckpointSpec(0, 1)], vocab=2)
    reduced = reduce_spec(spec, _has_checkpointed_tanh)
    assert reduced.vocab is None and reduced.input_requires_grad


def test_replaces_a_layer_with_parameters_by_the_simpler_kind_that_still_fails():
    # Where the fault self-test's shrinking once stopped: an MLP whose activation is the faulty tanh.
    def computes_tanh_in_a_checkpoint(spec: NetSpec) -> bool:
        return any(
            spec.checkpointed(i) and "tanh" in (layer.kind, layer.params.get("activation"))
            for i, layer in enumerate(spec.layers)
        )

    spec = NetSpec(
        features=1,
        layers=[LayerSpec("mlp", {"activation": "tanh", "hidden": 1, "out_features": 1})],
        checkpoints=[CheckpointSpec(0, 1)],
    )
    reduced = reduce_spec(spec, computes_tanh_in_a_checkpoint)
    assert reduced == NetSpec(features=1, layers=[LayerSpec("tanh")], checkpoints=[CheckpointSpec(0, 1)])
