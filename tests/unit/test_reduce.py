"""The spec-level reduction that follows Hypothesis's shrinking."""

import time
from dataclasses import replace

from fuzz.generate.ops import tensor_literals
from fuzz.generate.program_traits import flow_traits
from fuzz.generate.reduce import STAND_IN, in_no_op, reduce_spec, with_plumbing, without_randomness
from fuzz.generate.spec import CheckpointSpec, LayerSpec, NetSpec
from fuzz.judge.failures import MemoryFailure
from fuzz.model_builder import build_example, network_source
from fuzz.report.clusters import cluster_of
from fuzz.report.failures import blames


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
        features=1,
        layers=[LayerSpec("linear", {"out_features": 3, "bias": True}), LayerSpec("tanh")],
        checkpoints=[CheckpointSpec(0, 2)],
    )
    needs_linear = lambda s: _has_checkpointed_tanh(s) and any(layer.kind == "linear" for layer in s.layers)  # noqa: E731
    assert reduce_spec(spec, needs_linear) == spec


def test_goes_to_the_smallest_sizes_the_failure_allows():
    conv = {"out_channels": 2, "kernel": 3, "stride": 1, "padding": "same", "dilation": 1, "groups": 2}
    conv.update(bias=True, transposed=False, dims=2)
    spec = NetSpec(
        features=4, batch=3, spatial=[5, 3], layers=[LayerSpec("conv", conv)], checkpoints=[CheckpointSpec(0, 1)]
    )
    needs_groups = lambda s: s.layers[0].params.get("groups") == 2  # noqa: E731
    reduced = reduce_spec(spec, needs_groups)
    # Width 1 would need groups 1 (the spec would not be valid): the width stays, batch and image go to 1.
    assert (reduced.batch, reduced.features, reduced.spatial) == (1, 4, [1, 1])


def test_goes_back_to_the_plain_input_when_the_failure_does_not_need_the_embedding():
    spec = NetSpec(features=1, layers=[LayerSpec("tanh")], checkpoints=[CheckpointSpec(0, 1)], vocab=2)
    reduced = reduce_spec(spec, _has_checkpointed_tanh)
    assert reduced.vocab is None and reduced.input_requires_grad


def _checkpoints_two_aliased_inputs(spec: NetSpec) -> bool:
    return "program checkpoint of aliased inputs" in flow_traits(spec)


def test_an_update_goes_to_its_out_of_place_twin_and_loses_the_clone_it_updated():
    # What the program strategy draws where nothing may be updated yet: a fresh clone, updated in place.
    spec = NetSpec(
        layers=[LayerSpec("alias", reads=[0]), LayerSpec("clone", reads=[1]), LayerSpec("add_", reads=[2, 0])],
        outputs=[3],
        features=1,
        checkpoints=[CheckpointSpec(1, 3)],
    )
    assert reduce_spec(spec, _checkpoints_two_aliased_inputs) == NetSpec(
        layers=[LayerSpec("alias", reads=[0]), LayerSpec("add", reads=[1, 0])],
        outputs=[2],
        features=1,
        checkpoints=[CheckpointSpec(1, 2)],
    )
    # A failure that needs the update keeps it.
    needs_update = lambda s: _checkpoints_two_aliased_inputs(s) and any(layer.kind == "add_" for layer in s.layers)  # noqa: E731
    assert [layer.kind for layer in reduce_spec(spec, needs_update).layers] == ["alias", "clone", "add_"]


def test_an_update_that_only_makes_an_alias_goes_to_a_view_of_what_it_updates():
    # A checkpoint taking `v2 = v1.add_(v1)` and v1: two aliased inputs (a shrunk self-test finding, four layers).
    layers = [LayerSpec("clone", reads=[0]), LayerSpec("add_", reads=[1, 1])]
    layers += [LayerSpec("clone", reads=[2]), LayerSpec("tanh", reads=[1])]
    spec = NetSpec(features=1, layers=layers, checkpoints=[CheckpointSpec(2, 4)], outputs=[4, 2, 3])
    reduced = reduce_spec(spec, _checkpoints_two_aliased_inputs)
    assert reduced.layers[:2] == [LayerSpec("alias", reads=[0]), LayerSpec("clone", reads=[1])], reduced.to_json()
    assert len(reduced.layers) == 3 and reduced.checkpoints == [CheckpointSpec(1, 3)], reduced.to_json()


def test_a_view_of_a_deleted_input_is_fitted_to_what_it_views_then():
    # Columns 2:4 of a further input, which the failure does not need: deleted, the view is of x, of width 1.
    further = LayerSpec("state_input", {"width": 4, "requires_grad": True}, reads=[0])
    view = LayerSpec("input_view", {"start": 2, "length": 2}, reads=[1])
    spec = NetSpec(features=1, layers=[further, view, LayerSpec("tanh", reads=[2])], outputs=[3])
    reduced = reduce_spec(spec, lambda s: "program inputs viewing one another" in flow_traits(s))
    assert reduced.layers[0] == LayerSpec("input_view", {"start": 0, "length": 1}, reads=[0]), reduced.to_json()


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


def test_stops_when_its_time_is_up():
    spec = NetSpec(features=1, layers=[LayerSpec("relu")] * 6 + [LayerSpec("tanh")], checkpoints=[CheckpointSpec(6, 7)])

    def slow_still_fails(candidate: NetSpec) -> bool:
        time.sleep(0.2)
        return _has_checkpointed_tanh(candidate)

    assert len(reduce_spec(spec, slow_still_fails).layers) == 1
    started = time.monotonic()
    partly = reduce_spec(spec, slow_still_fails, max_seconds=0.1)
    assert time.monotonic() - started < 1.0 and len(partly.layers) > 1  # stopped before it was done


# Two op layers as the op sweep and the strategies write them (fuzz.generate.op_catalog): abs of one adapted tensor, and
# sub of two (a keyword argument is a tensor too).
def _op(op: str, *tensors: dict, **kwargs) -> LayerSpec:
    params = {"op": op, "form": "function", "target": f"torch.{op}", "args": list(tensors), "kwargs": kwargs}
    return LayerSpec("op", params)


_T3 = {"tensor": [3], "low": -1.0, "high": 1.0, "offset": 0}
_T2 = {"tensor": [2], "low": 0.5, "high": 2.0, "offset": 1}


def _computes_tanh_in_a_checkpoint(spec: NetSpec) -> bool:
    """A hidden fault in tanh inside checkpoints: every op layer's plumbing (`adapt`) computes tanh."""
    return any(
        spec.checkpointed(i) and (layer.kind in ("tanh", "op") or layer.kind == "op_plumbing" and layer.params["args"])
        for i, layer in enumerate(spec.layers)
    )


def test_a_failure_of_the_plumbing_is_not_blamed_on_the_op_it_was_found_with():
    spec = NetSpec(features=3, layers=[_op("sub", _T3, other=_T2)], checkpoints=[CheckpointSpec(0, 1)], dtype="float16")
    twin = with_plumbing(spec)
    assert twin.layers == [LayerSpec("op_plumbing", {"args": [_T3, _T2]})]
    assert "fold((adapt(x, (3,), -1.0, 1.0, 0), adapt(x, (2,), 0.5, 2.0, 1),), x)" in network_source(twin)
    # Each op replaced by identity first, then the plumbing by the simplest kind that still fails, in float32.
    reduced = reduce_spec(spec, _computes_tanh_in_a_checkpoint)
    assert reduced == NetSpec(features=1, layers=[LayerSpec("tanh")], checkpoints=[CheckpointSpec(0, 1)])
    assert blames(reduced) is None and blames(twin).startswith("the op family's plumbing")


def test_an_op_stays_only_when_its_call_replaced_by_identity_passes():
    spec = NetSpec(features=3, layers=[_op("abs", _T3), _op("sub", _T3, other=_T2)], checkpoints=[CheckpointSpec(0, 2)])
    needs_sub = lambda s: any(layer.params.get("op") == "sub" for layer in s.layers)  # noqa: E731
    reduced = reduce_spec(spec, needs_sub)
    assert [layer.params.get("op") for layer in reduced.layers] == ["sub"] and blames(reduced) == "op sub"


def test_the_blame_is_checked_past_the_reductions_budget():
    spec = NetSpec(features=3, layers=[LayerSpec("relu"), _op("abs", _T3)], checkpoints=[CheckpointSpec(0, 2)])
    checked: list[NetSpec] = []
    reduced = reduce_spec(spec, lambda s: checked.append(s) or _computes_tanh_in_a_checkpoint(s), max_checks=0)
    # The op's twin only (which fails: the op is gone): out of budget, nothing else is tried.
    assert checked == [with_plumbing(spec)] and reduced == with_plumbing(spec)
    spec = replace(spec, layers=[LayerSpec("relu"), _op("abs", _T2)])
    checked.clear()
    reduced = reduce_spec(spec, lambda s: checked.append(s) or _saves_an_intermediate_in_a_checkpoint(s), max_checks=0)
    # The op's twin (which passes), then its stand-in (which fails: no op is to blame), but not the relu's.
    assert checked == [with_plumbing(spec), replace(spec, layers=[spec.layers[0], _stand_in_of_abs_t2()])]
    assert reduced == checked[-1]


def _stand_in_of_abs_t2() -> LayerSpec:
    return LayerSpec(STAND_IN, {"args": [_T2], "function": "sin"})


def _saves_an_intermediate_in_a_checkpoint(spec: NetSpec) -> bool:
    """A fault in no op (thunderfx no longer recomputes a region): any region of two layers that compute something
    fails, whatever they compute (an op's identity twin computes nothing but its plumbing)."""
    computing = [i for i, layer in enumerate(spec.layers) if layer.kind != "op_plumbing"]
    return any(spec.checkpointed(i) and spec.checkpointed(i + 1) and i + 1 in computing for i in computing)


def _memory_failure() -> MemoryFailure:
    return MemoryFailure("a region's intermediates saved for backward")


def test_a_failure_that_stays_with_any_op_in_the_place_of_each_is_blamed_on_no_op():
    spec = NetSpec(
        features=3, layers=[LayerSpec("relu"), _op("abs", _T3), LayerSpec("tanh")], checkpoints=[CheckpointSpec(0, 3)]
    )
    reduced = reduce_spec(spec, _saves_an_intermediate_in_a_checkpoint)
    # Each op and kind is tried with identity (the op fails no more: it stays) and then with a stand-in (it still
    # fails: nothing in it is to blame), whichever of them the network was found with.
    assert [layer.kind for layer in reduced.layers] == [STAND_IN, STAND_IN] and in_no_op(reduced)
    assert blames(reduced).startswith("no op") and "in no op" in cluster_of(reduced, _memory_failure())["cluster_label"]
    found_with_others = replace(spec, layers=[LayerSpec("sigmoid"), LayerSpec("sin"), LayerSpec("abs")])
    twin = reduce_spec(found_with_others, _saves_an_intermediate_in_a_checkpoint)
    assert cluster_of(twin, _memory_failure())["cluster"] == cluster_of(reduced, _memory_failure())["cluster"]


def test_an_op_whose_stand_in_passes_is_blamed():
    spec = NetSpec(features=3, layers=[LayerSpec("relu"), _op("sin", _T3)], checkpoints=[CheckpointSpec(0, 2)])
    needs_sin = lambda s: any("sin" in (layer.kind, layer.params.get("op")) for layer in s.layers)  # noqa: E731
    reduced = reduce_spec(spec, needs_sin)
    # The op is sin: its stand-in is cos (never itself), which passes.
    assert [layer.params.get("op") for layer in reduced.layers] == ["sin"] and blames(reduced) == "op sin"


def test_a_random_networks_failure_goes_first_to_its_network_without_random_layers():
    spec = NetSpec(
        features=2,
        layers=[LayerSpec("dropout", {"p": "0.5"}), LayerSpec("tanh")],
        checkpoints=[CheckpointSpec(0, 2)],
    )
    checked: list[NetSpec] = []
    reduced = reduce_spec(spec, lambda s: checked.append(s) or _has_checkpointed_tanh(s))
    assert checked[0] == without_randomness(spec) and not reduced.random


def test_each_layer_alone_is_tried_once_where_one_deletion_at_a_time_gets_stuck():
    spec = NetSpec(features=1, layers=[LayerSpec("relu")] * 6 + [LayerSpec("tanh")], checkpoints=[CheckpointSpec(6, 7)])
    checked = []

    def fails_whole_or_alone(candidate: NetSpec) -> bool:  # no single deletion keeps it failing
        checked.append(candidate)
        return _has_checkpointed_tanh(candidate) and len(candidate.layers) in (1, 7)

    reduced = reduce_spec(spec, fails_whole_or_alone)
    assert reduced == NetSpec(features=1, layers=[LayerSpec("tanh")], checkpoints=[CheckpointSpec(0, 1)])
    # The relus alone (one network), the tanh alone, then the tanh without its checkpoint, then the tanh's stand-in:
    # no jump on the second pass.
    assert len(checked) == 4 and checked[-1].layers == [LayerSpec("stand_in", {"args": [], "function": "sin"})]


def test_a_layer_there_only_to_make_the_value_a_failure_needs_goes_under_another_seed():
    # (A clone's abs_ shows only on a negative value: which layers before it make one depends on the seed.)
    layers = [LayerSpec("relu"), LayerSpec("relu"), LayerSpec("tanh")]
    spec = NetSpec(features=1, layers=layers, checkpoints=[CheckpointSpec(2, 3)])

    def fails_whole_or_on_odd_seeds(candidate: NetSpec) -> bool:
        return _has_checkpointed_tanh(candidate) and (len(candidate.layers) == 3 or candidate.seed % 2 == 1)

    reduced = reduce_spec(spec, fails_whole_or_on_odd_seeds)
    assert [layer.kind for layer in reduced.layers] == ["tanh"] and reduced.seed == spec.seed + 1


def _runs_matmul_in_eager(spec: NetSpec) -> bool:
    if spec.layers[0].params.get("op") != "matmul":
        return False
    try:
        example = build_example(spec)
        example.net(example.input).backward(example.cotangent)
    except RuntimeError:
        return False
    return True


def _op_shapes(spec: NetSpec) -> list[list[int]]:
    params = spec.layers[0].params
    return [t["tensor"] for t in tensor_literals([*params["args"], *params["kwargs"].values()])]


def test_an_op_calls_tensors_shrink_to_the_smallest_shapes_that_still_fail():
    # A matmul's inner dimension must stay equal in both arguments: each size changes in all of them at once, and a
    # call the smaller shapes break fails in eager (a real run here), which no candidate survives.
    a, b = {**_T3, "tensor": [5, 4]}, {**_T2, "tensor": [4, 3]}
    spec = NetSpec(features=3, layers=[_op("matmul", a, b)], checkpoints=[CheckpointSpec(0, 1)])
    assert _runs_matmul_in_eager(spec)
    assert _op_shapes(reduce_spec(spec, _runs_matmul_in_eager)) == [[1, 1], [1, 1]]
    # A failure that needs the rows of the first argument keeps two of them (the largest size goes first, to 1, then
    # to 2); the other sizes still go to 1.
    needs_rows = lambda s: _runs_matmul_in_eager(s) and _op_shapes(s)[0][0] >= 2  # noqa: E731
    assert _op_shapes(reduce_spec(spec, needs_rows)) == [[2, 1], [1, 1]]
