"""Training steps (fuzz.generate.training, fuzz.run.passes.Training): plain data that round-trips and rejects what it
cannot run with one line; each step judged from eager's parameters at that step, the state training leaves judged
too; a fault in thunder that fires only from a compiled function's second call is invisible to one forward and
backward, found by a real campaign of training steps and shrunk to two steps of the smallest network."""

import json
import time
from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings

from fuzz.campaign.families import TRAINING, DrawOptions
from fuzz.generate.reduce import reduce_spec
from fuzz.generate.spec import CheckpointSpec, LayerSpec, NetSpec, SpecError, TrainingSpec, validate
from fuzz.generate.spec_parts import OPTIMIZERS as SPEC_OPTIMIZERS
from fuzz.generate.training import with_training
from fuzz.judge.verdict import check_spec
from fuzz.model_builder import build_example, network_source
from fuzz.registry.files import recorded_spec
from fuzz.registry.issue import KNOWN_ISSUES_DIR
from fuzz.registry.known_issues import KNOWN_ISSUES
from fuzz.registry.signatures import observe, read_entry, resemblance
from fuzz.report.repro import repro_source
from fuzz.run.passes import AT_STEP, OPTIMIZERS
from fuzz.run.runner import run_eager
from fuzz.strategies import net_specs
from tests.campaign_runs import run_campaign, run_repro
from tests.faults import injected

STALE = "stale-parameters-from-second-step"


def _net(training: TrainingSpec | None, **fields) -> NetSpec:
    layers = [
        LayerSpec("linear", {"out_features": 4, "bias": True}),
        LayerSpec("tanh"),
        LayerSpec("linear", {"out_features": 3, "bias": True}),
    ]
    return NetSpec(features=4, layers=layers, checkpoints=[CheckpointSpec(0, 2)], batch=2, training=training, **fields)


def test_training_round_trips_and_a_spec_without_it_keeps_its_json():
    spec = _net(TrainingSpec(4, "adamw", [2, 2, 3, 3]))
    assert NetSpec.from_json(spec.to_json()) == spec
    assert "training" not in json.loads(_net(None).to_json())


@pytest.mark.parametrize(
    ("training", "fields", "problem"),
    [
        (TrainingSpec(0), {}, "training.steps must be 1..8"),
        (TrainingSpec(3, "adam"), {}, "training.optimizer 'adam' is not one of sgd, adamw"),
        (TrainingSpec(3, "sgd", [2, 3]), {}, "training.batches must be null or 3 positive batch sizes"),
        (TrainingSpec(2, "sgd", [3, 3]), {}, "starting with batch 2"),
        (TrainingSpec(2), {"layers": [LayerSpec("dropout", {"p": "0.5"})], "checkpoints": []}, "without random layers"),
    ],
)
def test_training_that_cannot_run_is_a_one_line_error(training, fields, problem):
    data = json.loads(replace(_net(None), **fields).to_json())
    data["training"] = {"steps": training.steps, "optimizer": training.optimizer, "batches": training.batches}
    with pytest.raises(SpecError, match=problem) as error:
        NetSpec.from_dict(data)
    assert "\n" not in str(error.value)


def test_every_step_and_the_state_training_leaves_are_judged_and_pass_on_thunder():
    spec = _net(TrainingSpec(3, "adamw", [2, 2, 3]))
    names = run_eager(build_example(spec))[1]
    assert {"output at step 1", "layer0.weight at step 2", "input at step 2"} <= set(names)
    assert {"parameter layer0.weight after training", "optimizer exp_avg_sq of layer2.bias after training"} <= set(
        names
    )
    assert names["input at step 2"].shape == (3, 4)  # the batch size changed at step 2: dynamo recompiles
    for optimizer in ("sgd", "adamw"):
        for dtype in ("float32", "bfloat16"):
            outcome = check_spec(replace(spec, dtype=dtype, training=TrainingSpec(3, optimizer, [2, 2, 3])))
            assert outcome.valid and outcome.failure is None, (optimizer, dtype, outcome.failure)


def test_a_fault_from_the_second_step_on_shows_only_at_later_steps_and_the_reducer_keeps_two_steps():
    with injected(STALE):
        assert check_spec(_net(None)).failure is None
        spec = _net(TrainingSpec(3, "adamw"))
        failure = check_spec(spec).failure
        assert failure is not None and failure.failure_class == "forward-divergence"
        roles = observe(spec, failure).roles
        assert roles and all(role.endswith(" at a later step") for role in roles if role != "state after training")

        def still_fails(candidate: NetSpec) -> bool:
            found = check_spec(candidate).failure
            return found is not None and found.failure_class == failure.failure_class

        reduced = reduce_spec(spec, still_fails)
    assert reduced.training == TrainingSpec(2, "sgd"), reduced.to_json()
    assert len(reduced.layers) == 1 and reduced.layers[0].kind == "linear", reduced.to_json()


@settings(max_examples=60, database=None, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(with_training(net_specs(dtypes=("float32", "float64"))))
def test_drawn_training_is_valid_and_trains_eagerly(spec):
    assert spec.training is not None and 3 <= spec.training.steps <= 5
    assert NetSpec.from_json(spec.to_json()) == spec
    output, results = run_eager(build_example(spec))
    assert f"output at step {spec.training.steps - 1}" in results
    assert "def make_batches():" in network_source(spec)


@settings(max_examples=150, database=None, deadline=None, suppress_health_check=list(HealthCheck))
@given(TRAINING.strategy(DrawOptions()))
def test_the_training_family_draws_only_valid_specs(spec):
    # (The nightly profile's programs have further inputs half the time, and a program of several inputs does not
    # train: `make campaign` once ran such a spec, 'forward() missing 1 required positional argument'.)
    validate(spec)
    assert spec.training is not None


@pytest.mark.slow
def test_a_fault_only_training_steps_reach_is_found_and_shrunk_to_two_steps(tmp_path):
    started = time.monotonic()
    run = run_campaign(
        tmp_path,
        "--hypothesis-profile",
        "nightly",
        "--fuzz-minutes",
        "4",
        "--fuzz-families",
        TRAINING.name,
        "--known-issues",
        "xfail",
        fault=STALE,
    )
    wall = time.monotonic() - started
    assert run.returncode == 1, run.stdout[-3000:] + run.stderr[-3000:]
    folder = tmp_path / "artifacts" / "latest"
    summary = json.loads((folder / "summary.json").read_text())
    specs = {f["id"]: NetSpec.from_json((folder / f["id"] / "spec.json").read_text()) for f in summary["failures"]}
    faults = [f for f in summary["failures"] if check_spec(specs[f["id"]]).failure is None]
    assert len(faults) == 1, summary["failures"]
    (failure,) = faults
    spec = specs[failure["id"]]
    print(
        f"{STALE}: found after {summary['first_failure']['after_s']} s, shrunk after {failure['shrunk_after_s']} s "
        f"(campaign {wall:.0f} s) to {spec.to_json()}"
    )
    assert spec.training is not None and spec.training.steps == 2, spec.to_json()
    assert len(spec.layers) == 1, spec.to_json()
    assert "REPRODUCED" in (folder / failure["id"] / "confirmation.txt").read_text()
    assert failure["shrunk_after_s"] < 300


@pytest.mark.parametrize("entry", ["inplace-op-on-clone-wrong-grad", "inplace-silu-wrong-grad"])
def test_a_known_bug_met_in_training_steps_is_still_that_known_issue(entry):
    (issue,) = [issue for issue in KNOWN_ISSUES if issue.id == entry]
    spec = replace(recorded_spec(entry), training=TrainingSpec(3, "adamw"))
    failure = check_spec(spec).failure
    assert failure is not None and any(AT_STEP in m.name for m in failure.mismatches), failure
    assert issue.reproduced_by(failure, spec), resemblance(read_entry(KNOWN_ISSUES_DIR / entry), observe(spec, failure))


def test_a_training_failure_s_repro_reproduces_it_standalone_and_passes_without_the_fault(tmp_path):
    spec = _net(TrainingSpec(2, "sgd"))
    with injected(STALE):
        failure = check_spec(spec).failure
    repro = tmp_path / "repro.py"
    repro.write_text(repro_source(spec, failure, "fixed"))
    faulty, stock = run_repro(repro, STALE), run_repro(repro, None)
    assert faulty.returncode == 1, faulty.stdout[-2000:] + faulty.stderr[-2000:]
    assert "at step 1" in faulty.stdout
    assert stock.returncode == 0, stock.stdout[-2000:] + stock.stderr[-2000:]


def test_batch_norm_inside_a_checkpoint_trains_right_from_the_same_starts_with_and_without_its_checkpoint():
    # Eager's checkpoint recomputation updates the running statistics twice: judged at each step's state after
    # backward against its state after forward, never as the buffers training leaves, and the triage's network
    # without checkpoints trains from the same starts.
    norm = LayerSpec("batch_norm", {"affine": True, "track_running_stats": True, "eval": False, "dims": 1})
    spec = replace(_net(TrainingSpec(3, "adamw")), layers=[norm, LayerSpec("tanh")], features=2, spatial=[3])
    spec = NetSpec.from_json(spec.to_json())  # valid
    assert check_spec(spec).failure is None
    with injected(STALE):
        failure = check_spec(spec).failure
    assert failure is not None and failure.triage == "thunder-general", failure


def test_the_optimizers_a_spec_names_are_the_ones_training_runs():
    assert set(SPEC_OPTIMIZERS) == set(OPTIMIZERS)


def test_the_training_family_trains_every_family_with_a_training_weight():
    """The training family draws the general, program, decoder and (transformers installed) zoo networks, as its
    row says: a family missing from it would never be trained (the row's strategy read the table's rows)."""
    from hypothesis import find

    from fuzz.campaign.families import DECODER, FAMILIES, TRAINING, ZOO, DrawOptions

    trained = [family for family in FAMILIES if family.training_weight]
    assert {DECODER.name, ZOO.name} <= {family.name for family in trained}
    assert all(family.unavailable() is None for family in trained)
    strategy = TRAINING.strategy(DrawOptions(dtypes=("float32",), kinds=("tanh", "relu", "linear")))
    assert find(strategy, lambda spec: spec.training is not None and spec.dtype == "float32").training is not None
    assert find(strategy, lambda spec: spec.model is None and spec.layers[0].kind == "decoder_block") is not None
