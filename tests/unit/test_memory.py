"""The memory contract of checkpointing (fuzz.judge.memory), judged by mechanism: a region thunder's traces show not
recomputed in backward (same values, same gradients) is a `memory` failure, checkpoint-specific, that its repro.py
reproduces standalone and a real campaign finds and shrinks; what a forward saves for backward is measured under eager
and thunderfx alike and shown by reason, never failed."""

import gc
import json
import time
import weakref
from dataclasses import replace
from pathlib import Path

import pytest
import torch
from torch.utils.checkpoint import checkpoint

from fuzz.campaign.families import GENERAL
from fuzz.generate.spec import CheckpointSpec, LayerSpec, NetSpec
from fuzz.judge.verdict import check_spec
from fuzz.registry.files import recorded_spec
from fuzz.registry.fixes import applied, fixes_for
from fuzz.registry.issue import explained_by
from fuzz.registry.known_issues import KNOWN_ISSUES
from fuzz.report.repro import repro_source
from fuzz.report.stats import saved_ratios
from fuzz.run.passes import SavedForBackward
from fuzz.run.regions import GENERATOR_STATE, INTERMEDIATE, OUTPUT, POLICY_SAVED, RECOMPUTED_TOO, WIDER_COPY
from tests.campaign_runs import run_campaign, run_repro
from tests.faults import injected

DROPPED = "checkpoints-dropped"
SOME_DROPPED = "every-second-checkpoint-not-recomputed"


def _net(**fields) -> NetSpec:
    layers = [LayerSpec("linear", {"out_features": 16, "bias": True}), LayerSpec("tanh")] * 3
    return NetSpec(features=16, layers=layers, checkpoints=[CheckpointSpec(0, 6)], batch=4, **fields)


class _Three(torch.nn.Module):
    def __init__(self, checkpointing: bool):
        super().__init__()
        self.layers, self.checkpointing = (
            torch.nn.Sequential(*(torch.nn.Linear(64, 64) for _ in range(3))),
            checkpointing,
        )

    def forward(self, x):
        x = x * 2  # a region input that is not the network's input
        return checkpoint(self.layers, x, use_reentrant=False) if self.checkpointing else self.layers(x)


@pytest.mark.parametrize(("checkpointing", "expected"), [(True, 8 * 64 * 4), (False, 3 * 8 * 64 * 4)])
def test_the_meter_counts_what_a_forward_saves_beside_the_parameters_and_the_input(checkpointing, expected):
    net, x = _Three(checkpointing), torch.randn(8, 64, requires_grad=True)
    meter = SavedForBackward(net, x)
    meter.measuring(net)(x).sum().backward()
    assert meter.bytes == expected, meter.storages  # the checkpoint keeps its input only; the weights are not counted
    net(x).sum().backward()  # a later call is not measured
    assert meter.bytes == expected


# The reviewer's network of issue 46: thunderfx saves 1,152 B for backward where eager saves 128 B, yet recomputes each
# region's first softmax; the bytes are thunder's design (each region's output kept; float32 copies of bfloat16
# activations), not a region it stopped checkpointing.
_SOFTMAXES = [LayerSpec("softmax"), LayerSpec("softmax")]
TWO_REGIONS = NetSpec(
    features=16,
    batch=4,
    dtype="bfloat16",
    layers=[*_SOFTMAXES, LayerSpec("tanh"), *_SOFTMAXES, LayerSpec("sigmoid")],
    checkpoints=[CheckpointSpec(0, 2), CheckpointSpec(3, 5)],
)


def test_bytes_thunder_keeps_by_design_are_shown_by_reason_not_failed():
    outcome = check_spec(TWO_REGIONS)
    assert outcome.failure is None, outcome.failure
    thunder, eager = outcome.saved_bytes
    assert thunder > 4 * eager, outcome.saved_bytes  # a failure by the former byte rule
    regions = outcome.compile_report.regions
    assert [region.recomputed for region in regions.regions] == [["softmax"], ["softmax"]]
    assert regions.saved[OUTPUT] == 2 * 4 * 16 * 2 and regions.saved[WIDER_COPY] > 0
    assert INTERMEDIATE not in regions.saved


# Found by the first campaign of the trace rule (a false alarm of ours): a float64 layer_norm's region output is its
# own `to` (a shallow copy inside the region), then the grad transform's copy of it; followed through both copies,
# it was taken for the add before them, an intermediate.
LAYER_NORMS_IN_THREE_REGIONS = NetSpec(
    features=2,
    batch=4,
    seq=5,
    dtype="float64",
    seed=527,
    input_requires_grad=False,
    layers=[LayerSpec("log_softmax"), *[LayerSpec("layer_norm", {"elementwise_affine": True})] * 2],
    checkpoints=[
        CheckpointSpec(0, 1, determinism_check="none"),
        CheckpointSpec(1, 2, determinism_check="none"),
        CheckpointSpec(2, 3, extra_args=True, multi_output=True),
    ],
)


def test_a_region_output_copied_inside_its_region_is_an_output_not_an_intermediate():
    outcome = check_spec(LAYER_NORMS_IN_THREE_REGIONS)
    assert outcome.failure is None, outcome.failure
    assert not outcome.compile_report.regions.not_recomputed()


def test_intermediates_saved_and_recomputed_too_are_no_memory_failure():
    # make test's derandomized campaign drew it (a false alarm of the first trace rule): F.batch_norm in training mode
    # on running statistics made inside the region; thunder recomputes var_mean for the gradient, and replays the
    # running-statistics update (an in-place copy) in backward from the forward's saved mean and variance.
    spec = NetSpec.from_json((Path(__file__).parents[1] / "specs" / "batch-norm-update-replayed.json").read_text())
    outcome = check_spec(spec)
    assert outcome.failure is None, outcome.failure
    regions = outcome.compile_report.regions
    assert regions.saved[RECOMPUTED_TOO] == 16 and "var_mean" in regions.regions[0].recomputed


def test_a_region_output_the_network_never_reads_is_an_output_not_an_intermediate():
    # A program self-test's campaign drew it (a false alarm): checkpoint(clone -> linear) returning the clone too,
    # which the network drops. Thunder's grad transform keeps every checkpoint output, this one too; with no reader
    # after the region, its copy is made only in backward, where the linear's backward reads it.
    spec = NetSpec.from_json((Path(__file__).parents[1] / "specs" / "unused-region-output-kept.json").read_text())
    outcome = check_spec(spec)
    assert outcome.failure is None, outcome.failure
    regions = outcome.compile_report.regions
    assert not regions.not_recomputed() and regions.saved[OUTPUT] == 4  # the clone, one float32


def test_a_generator_state_kept_for_a_replayed_draw_is_no_memory_failure_and_stock_thunder_a_gradient_divergence():
    # dropout-in-checkpoint-fresh-mask's fix: a checkpointed CPU dropout keeps the generator's state before its draw
    # and backward replays it. The state is shown, not failed; stock thunder draws afresh (a gradient failure).
    spec = recorded_spec("dropout-in-checkpoint-fresh-mask")  # Dropout(0.5) in one checkpoint, batch 2, 8 features
    assert check_spec(spec).failure.failure_class == "gradient-divergence"
    with applied(fixes_for(["dropout-in-checkpoint-fresh-mask"])):
        outcome = check_spec(spec)
    assert outcome.failure is None, outcome.failure
    regions = outcome.compile_report.regions
    assert regions.saved[GENERATOR_STATE] == torch.get_rng_state().numel()
    assert not regions.not_recomputed() and INTERMEDIATE not in regions.saved


def test_a_region_thunder_no_longer_recomputes_is_a_memory_failure_naming_that_region_only():
    # The same values and gradients, and the same bytes saved as unfaulted: region 2 saves its first softmax where it
    # used to save its input. Only the traces tell.
    with injected(SOME_DROPPED):
        outcome = check_spec(TWO_REGIONS)
    failure = outcome.failure
    assert failure is not None and failure.failure_class == "memory", failure
    assert failure.triage == "checkpoint-specific"
    assert "region tag_activation_checkpoint_1 (softmax, softmax)" in str(failure)
    assert "region tag_activation_checkpoint " not in str(failure)  # the first region is still recomputed


def test_a_region_no_longer_checkpointed_is_a_checkpoint_specific_memory_failure():
    spec = _net()
    outcome = check_spec(spec)
    assert outcome.failure is None and outcome.saved_bytes is not None, outcome.failure
    with injected(DROPPED):
        outcome = check_spec(spec)
    failure = outcome.failure
    assert failure is not None and failure.failure_class == "memory", failure
    assert failure.triage == "checkpoint-specific"
    assert "1 of the 1 checkpoints dynamo captured are no checkpoint in thunder's traces" in str(failure), failure


# linear -> tanh -> linear in a checkpoint whose selective policy saves the matmuls (MUST_SAVE): eager keeps both
# matmul results; thunderfx never asks the policy (issue 46; known issue selective-checkpoint-policy-ignored).
SELECTIVE = NetSpec(
    features=32,
    batch=16,
    layers=[
        LayerSpec("linear", {"out_features": 64, "bias": False}),
        LayerSpec("tanh"),
        LayerSpec("linear", {"out_features": 32, "bias": False}),
        LayerSpec("relu"),
    ],
    checkpoints=[CheckpointSpec(0, 3, selective=True)],
)


def test_a_selective_policy_thunderfx_ignores_is_a_memory_failure_of_its_known_issue():
    failure = check_spec(SELECTIVE).failure
    assert failure is not None and failure.failure_class == "memory", failure
    assert failure.triage == "checkpoint-specific"
    assert "a selective checkpoint's policy is not honoured" in str(failure)
    assert "(MUST_SAVE); thunderfx's backward recomputes linear" in str(failure), failure
    issue = next(issue for issue in KNOWN_ISSUES if issue.id == "selective-checkpoint-policy-ignored")
    assert issue.applies(SELECTIVE) and issue.reproduced_by(failure, SELECTIVE)
    assert explained_by(SELECTIVE, [issue], "fixed", 60.0)  # without the policy: every region recomputed, no failure


def test_matmuls_a_selective_policy_saves_are_not_taken_for_a_region_not_recomputed():
    # Two selective regions, linear -> gelu -> linear, the second no longer recomputed (the fault): of its results
    # saved for backward, the first linear's (gelu's backward reads it) is what the policy asks to save; gelu's
    # (PREFER_RECOMPUTE) are intermediates of a region not recomputed.
    layers = [SELECTIVE.layers[0], LayerSpec("gelu"), SELECTIVE.layers[2]] * 2
    regions = [CheckpointSpec(0, 3, selective=True), CheckpointSpec(3, 6, selective=True)]
    with injected(SOME_DROPPED):
        regions = check_spec(replace(SELECTIVE, layers=layers, checkpoints=regions)).compile_report.regions
    assert regions.saved.get(POLICY_SAVED) == 16 * 64 * 4, regions.saved
    assert [bool(region.saved_intermediates) for region in regions.regions] == [False, True]  # gelu's, not linear's


def test_the_summary_s_ratio_by_region_kind():
    ratios = saved_ratios({"checkpoint": [[256, 256], [512, 256], [0, 0]], "sequential": [[8, 0]]})
    assert ratios["checkpoint"] == {"examples": 3, "median": 1.0, "worst": 2.0}
    assert ratios["sequential"]["worst"] == float("inf")


def test_a_memory_failure_s_repro_reproduces_it_standalone_and_passes_without_the_fault(tmp_path):
    spec = _net()
    with injected(DROPPED):
        failure = check_spec(spec).failure
    repro = tmp_path / "repro.py"
    repro.write_text(repro_source(spec, failure, "fixed"))
    faulty, stock = run_repro(repro, DROPPED), run_repro(repro, None)
    assert faulty.returncode == 1, faulty.stdout[-2000:] + faulty.stderr[-2000:]
    assert "are no checkpoint in thunder's traces" in faulty.stdout, faulty.stdout[-2000:]
    assert stock.returncode == 0, stock.stdout[-2000:] + stock.stderr[-2000:]


@pytest.mark.slow
def test_a_region_no_longer_checkpointed_is_found_and_shrunk(tmp_path):
    started = time.monotonic()
    run = run_campaign(
        tmp_path, "--hypothesis-profile", "dev", "--fuzz-minutes", "4", "--fuzz-families", GENERAL.name, fault=DROPPED
    )
    wall = time.monotonic() - started
    assert run.returncode == 1, run.stdout[-3000:] + run.stderr[-3000:]
    folder = tmp_path / "artifacts" / "latest"
    summary = json.loads((folder / "summary.json").read_text())
    memory = [f for f in summary["failures"] if f["class"] == "memory"]
    assert memory, summary["failures"]
    failure = min(memory, key=lambda f: f["shrunk_after_s"])
    spec = NetSpec.from_json((folder / failure["id"] / "spec.json").read_text())
    print(
        f"{DROPPED}: found after {summary['first_failure']['after_s']} s, shrunk after {failure['shrunk_after_s']} s "
        f"(campaign {wall:.0f} s) to {spec.to_json()}"
    )
    assert failure["triage"] == "checkpoint-specific"
    assert len(spec.checkpoints) == 1 and len(spec.layers) <= 3, spec.to_json()
    assert "REPRODUCED" in (folder / failure["id"] / "confirmation.txt").read_text()
    assert failure["shrunk_after_s"] < 300
    assert any("saved for backward" in line for line in run.stdout.splitlines()), run.stdout[-3000:]


def test_a_measured_forward_without_backward_leaves_nothing_alive():
    # A pack hook that keeps the tensor itself closes a loop output -> grad_fn -> saved output (tanh saves its
    # output) that Python's collector cannot see: the parameters behind it stayed alive after every eager measure.
    net, x = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Tanh()), torch.randn(2, 4)
    parameter = weakref.ref(net[0].weight)
    output = SavedForBackward(net, x).measuring(net)(x)
    del net, output
    gc.collect()
    assert parameter() is None


class _KeepsGeneratorState(torch.autograd.Function):
    """As thunderfx's inductor fallback with a checkpoint's `preserve_rng_state`: the state saved for backward."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(torch.get_rng_state())
        return x * 2

    @staticmethod
    def backward(ctx, grad):
        return grad * 2


def test_a_generator_state_saved_for_a_checkpoint_s_replay_is_not_counted():
    # Eager's checkpoint keeps the same state unseen (in its frame): counted on thunder's side only, a region of
    # sdpa thunder sent to inductor read as 5056 B kept where eager keeps nothing, whatever the network's size.
    net, x = torch.nn.Identity(), torch.randn(2, 4, requires_grad=True)
    meter = SavedForBackward(net, x)
    meter.measuring(lambda x: _KeepsGeneratorState.apply(x) + 1)(x)
    assert meter.bytes == 0, meter.storages
