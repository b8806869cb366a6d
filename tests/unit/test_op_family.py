"""The op family: read from thunder's OpInfos, every call runs eagerly, and a one-argument fault is found and shrunk."""

import json
import random
import time

import pytest
import torch
from hypothesis import HealthCheck, given, settings

from fuzz.campaign.families import SWEEP
from fuzz.generate.op_catalog import _build_catalog, catalog
from fuzz.generate.spec import DTYPES, LayerSpec, NetSpec
from fuzz.generate.sweep import sweep_specs
from fuzz.model_builder import build_example, network_source
from fuzz.run.runner import run_eager
from fuzz.strategies import net_specs
from tests.campaign_runs import run_campaign

FAULT = "leaky-relu-slope-grad-x2"
# A small vocabulary around the faulty op: other activations of the catalog and two hand-written kinds.
_OPS = "tanh,sigmoid,relu,leaky_relu,elu"


def _layer(call) -> LayerSpec:
    return LayerSpec(call.kind, call.params)


def test_the_catalog_is_read_from_thunders_opinfos_and_names_what_it_leaves_out():
    found = catalog()
    assert len(found.mapped_differentiable) >= 150, "thunder maps far more differentiable ops than this"
    assert len(found.ops) >= 0.9 * len(found.mapped_differentiable)
    assert set(found.ops).isdisjoint(found.excluded) and all(found.excluded.values())
    assert set(found.mapped_differentiable) <= set(found.ops) | set(found.excluded)
    assert {"leaky_relu", "conv2d", "layer_norm", "scatter_add", "interpolate", "cross_entropy"} <= set(found.ops)
    assert {call.form for call in found.calls} == {"function", "method", "inplace", "module"}


def test_the_catalog_holds_the_same_literals_whatever_ran_before_it():
    """OpInfo samples are random: a catalog built after other work (another worker, another machine, a fleet
    job) must still decode a saved choice sequence to the same network, and leave the caller's generators alone."""
    from thunder.tests.opinfos import opinfos

    some = [o for o in opinfos if o.name in {"abs", "masked_fill", "scatter", "layer_norm", "where"}]
    built = []
    for seed in (1, 2):
        torch.manual_seed(seed)
        random.seed(seed)
        before = torch.get_rng_state(), random.getstate()
        built.append(_build_catalog(some))
        assert torch.equal(torch.get_rng_state(), before[0]) and random.getstate() == before[1]
    assert built[0] == built[1] and len(built[0].calls) > 10
    assert any(isinstance(a, dict) and "low" in a for call in built[0].calls for a in call.args)


def test_every_op_call_builds_and_runs_eagerly_in_every_dtype_it_lists():
    start, runs = time.perf_counter(), 0
    for spec in sweep_specs("cpu", DTYPES):
        call_spec = NetSpec.from_json(spec.to_json())  # the JSON round trip validates the op params
        output, grads = run_eager(build_example(call_spec))
        runs += 1
        assert torch.isfinite(output).all() and all(torch.isfinite(g).all() for g in grads.values()), spec.to_json()
    for call in catalog().calls:
        for dtype in call.dtypes:
            output, grads = run_eager(build_example(NetSpec(4, [_layer(call)], batch=2, dtype=dtype)))
            runs += 1
            assert torch.isfinite(output).all() and grads, (call, dtype)
    print(f"{runs} eager runs of op layers in {time.perf_counter() - start:.1f} s")


def test_a_repro_of_an_op_layer_spells_out_the_call_with_literals_only():
    call = next(c for c in catalog().calls if c.op == "leaky_relu" and c.kwargs.get("negative_slope") == 0.5)
    source = network_source(NetSpec(4, [_layer(call)], batch=2))
    assert "torch.nn.functional.leaky_relu(adapt(x, " in source and "negative_slope=0.5" in source
    assert "fuzz" not in source.replace("fuzz_generated", "") and "opinfos" not in source


@settings(max_examples=300, derandomize=True, database=None, suppress_health_check=list(HealthCheck))
@given(spec=net_specs())
def test_specs_never_hold_reentrant_or_nested_checkpoints_outside_the_nested_slice(spec):
    assert not any(c.use_reentrant or c.nested for c in spec.checkpoints)


@settings(max_examples=100, derandomize=True, database=None, suppress_health_check=list(HealthCheck))
@given(spec=net_specs(nested=True))
def test_the_nested_slice_nests_every_checkpoint_that_can_and_never_draws_reentrant(spec):
    assert all(c.nested for c in spec.checkpoints if c.api == "checkpoint")
    assert not any(c.use_reentrant for c in spec.checkpoints)


@pytest.fixture(scope="module")
def faulty_op_campaign(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("faulty-op")
    run = run_campaign(
        tmp,
        "--hypothesis-profile", "nightly", "--fuzz-minutes", "4", "--fuzz-seed", "3",
        "--fuzz-layers", "op,op_module,linear,tanh", "--fuzz-ops", _OPS,
        fault=FAULT,
    )  # fmt: skip
    return run, (tmp / "artifacts" / "latest").resolve()


@pytest.mark.slow
def test_a_fault_in_one_non_default_argument_is_found_and_shrunk_to_that_call_alone(faulty_op_campaign):
    run, artifacts = faulty_op_campaign
    assert run.returncode == 1, run.stdout[-3000:] + run.stderr[-3000:]
    summary = json.loads((artifacts / "summary.json").read_text())
    (failure,) = summary["failures"]
    spec = NetSpec.from_json((artifacts / failure["id"] / "spec.json").read_text())
    (layer,) = spec.layers
    assert layer.params["op"] == "leaky_relu" and layer.params["kwargs"] == {"negative_slope": 0.5}, spec.to_json()
    assert len(spec.checkpoints) == 1 and failure["triage"] == "checkpoint-specific"
    detect_s, shrunk_s = summary["first_failure"]["after_s"], failure["shrunk_after_s"]
    print(f"detected after {detect_s} s (example {summary['first_failure']['example']}); shrunk after {shrunk_s} s")


def test_the_sweep_finds_exactly_the_faulty_argument_variants(tmp_path):
    run = run_campaign(tmp_path, "--fuzz-families", SWEEP.name, "--fuzz-layers", "op,op_module",
                       "--fuzz-ops", "leaky_relu,relu", fault=FAULT)  # fmt: skip
    assert run.returncode == 1, run.stdout[-3000:] + run.stderr[-3000:]
    artifacts = tmp_path / "artifacts" / "latest"
    summary = json.loads((artifacts / "summary.json").read_text())
    failing = [NetSpec.from_json((artifacts / f["id"] / "spec.json").read_text()) for f in summary["failures"]]
    calls = [c for c in catalog().calls if c.op in ("leaky_relu", "relu")]
    faulty = [c for c in calls if c.op == "leaky_relu" and c.kwargs.get("negative_slope", 0.01) != 0.01]
    assert faulty and len(failing) == len(faulty), summary["failures"]
    assert all(s.layers[0].params["kwargs"].get("negative_slope") == 0.5 for s in failing)
    assert summary["harness_errors"] == [] and summary["result"] == f"failed: {len(faulty)} failure(s)"
    # Every sample call, then each argument axis value class of each op (fuzz.generate.axes).
    cases = sweep_specs("cpu", DTYPES, ops=["leaky_relu", "relu"])
    assert summary["examples"] == len(cases) > len(calls)
    assert summary["op_family"]["share_in_compiled_checkpoint"] == 1.0
