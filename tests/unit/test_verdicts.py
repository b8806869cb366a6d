"""Verdicts users can trust: no low-precision blind spots, an accuracy class, harness errors that are ours,
known issues attributed only when their trigger explains the failure, bisect-safe repros confirmed in a
fresh interpreter, and failure folders that never overwrite each other."""

import copy
import dataclasses
import os
import subprocess
import sys

import pytest
import torch

import fuzz.run.runner
from fuzz.campaign.config import CampaignConfig
from fuzz.campaign.engine import Campaign
from fuzz.generate.spec import CheckpointSpec, LayerSpec, NetSpec
from fuzz.judge.failures import AccuracyGap, GradientDivergence, ThunderCrash, judge
from fuzz.judge.tolerance import compare, mismatch
from fuzz.judge.verdict import check_spec
from fuzz.model_builder import build_example
from fuzz.registry.files import recorded_spec
from fuzz.registry.known_issues import known_issues_for
from fuzz.report.failures import confirm, failure_id, write_failure
from fuzz.run.passes import float64_reference, forward_backward, fresh_input, nudged_runs
from fuzz.run.runner import HarnessError, run_eager, run_reference
from tests.campaign_runs import fault_everywhere
from tests.faults import injected

TANH_IN_A_CHECKPOINT = NetSpec(features=4, batch=2, layers=[LayerSpec("tanh")], checkpoints=[CheckpointSpec(0, 1)])


def _bfloat16(seed: int = 0, n: int = 64) -> tuple[torch.Tensor, torch.Tensor]:
    reference = torch.randn(n, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    return reference, reference.to(torch.bfloat16)


# -- the oracle's former blind spots, on constructed bfloat16 tensors (no flip probe shows a jump) --


def test_a_one_element_gradient_returned_as_zero_fails():
    reference, eager = _bfloat16(n=1)
    assert mismatch(torch.zeros_like(eager), eager, reference, 1.0, sensitivity=0.0) is not None


def test_a_small_scale_gradient_doubled_fails():
    # Largest value 0.002 in an example of scale 1: the example's eps S slack used to hide it elementwise (rule 3
    # caught it); eager's own error shows no cancellation, so it is judged on its own scale, elementwise and by scale.
    reference, _ = _bfloat16()
    reference = reference / reference.abs().max() * 0.002
    eager = reference.to(torch.bfloat16)
    assert mismatch(eager, eager, reference, 1.0, sensitivity=0.0) is None
    assert "judged on its own scale" in mismatch(eager * 2, eager, reference, 1.0, sensitivity=0.0)
    assert "systematic scale error" in mismatch(eager * 2, eager, reference, 1.0)  # unprobed: eps S applies


def test_one_zeroed_element_is_a_flip_only_where_eager_itself_jumps_under_a_nudge():
    reference, eager = _bfloat16(seed=2)
    flipped = eager.clone()
    flipped[7] = 0
    assert mismatch(flipped, eager, reference, 2.0, sensitivity=0.0) is not None  # eager is smooth there
    jumps = torch.zeros(64, dtype=torch.float64)
    jumps[7] = eager[7].abs().item()  # a nudged eager run moved that element by as much
    assert mismatch(flipped, eager, reference, 2.0, sensitivity=jumps) is None


def test_the_nudge_probe_finds_a_real_kink_and_accepts_a_flip_there_only():
    # relu(w x + b) with one unit exactly at relu's kink (3 - 3 = 0): eager's weight gradient there is 0, and
    # a rounding difference of an ulp makes it x = 3. The other units are far from the kink.
    net = torch.nn.Sequential(torch.nn.Linear(1, 4), torch.nn.ReLU()).to(torch.bfloat16)
    with torch.no_grad():
        net[0].weight.fill_(1.0)
        net[0].bias.copy_(torch.tensor([-3.0, 0.0, 0.0, 0.0]))
    x, cotangent = torch.full((1, 1), 3.0, dtype=torch.bfloat16), torch.ones(1, 4, dtype=torch.bfloat16)
    eager = forward_backward(net, net, fresh_input(x), cotangent)
    reference = float64_reference(net, x, cotangent)
    assert eager[1]["0.weight"].flatten().tolist() == [0.0, 3.0, 3.0, 3.0]
    nudged = nudged_runs(net, x, cotangent)
    flip = eager[1]["0.weight"].clone()
    flip[0] = 3.0  # thunder on the other side of the kink
    at_the_kink = (eager[0], {**eager[1], "0.weight": flip})
    assert judge(at_the_kink, eager, reference, probe=lambda: nudged) is None
    assert judge(at_the_kink, eager, reference, probe=lambda: []) is not None  # without a jump it is an error
    far = eager[1]["0.weight"].clone()
    far[1] = 0.0  # the same-sized change where eager is smooth
    assert judge((eager[0], {**eager[1], "0.weight": far}), eager, reference, probe=lambda: nudged) is not None


# -- float64: eager's own spread over nudged copies is the noise of a tensor whose truth cancels --


# A layer_norm over one feature makes every gradient before it 0 in truth: thunderfx gives exactly 0, eager its own
# rounding (-1.8e-15 on seed 2, -3.4e-14 on seed 3 at batch 4), judged a thunder-general divergence while float64's
# noise was a float32 twin's error scaled by eps64/eps32 (20x below eager's spread over the nudged copies).
def _layer_norm_of_one_feature(batch: int, seed: int) -> NetSpec:
    layers = [
        LayerSpec("layer_norm", {"elementwise_affine": True}),
        LayerSpec("linear", {"out_features": 1, "bias": True}),
        LayerSpec("layer_norm", {"elementwise_affine": True}),
    ]
    return NetSpec(
        features=18, batch=batch, dtype="float64", seed=seed, layers=layers, checkpoints=[CheckpointSpec(1, 2)]
    )


@pytest.mark.parametrize("batch, seed", [(2, 2), (4, 3)])
def test_a_float64_gradient_that_cancels_to_zero_passes_and_an_error_on_it_still_fails(batch, seed):
    assert check_spec(_layer_norm_of_one_feature(batch, seed)).failure is None  # thunderfx's exact 0 vs eager's noise
    example = build_example(_layer_norm_of_one_feature(batch, seed))
    net, x, cotangent = example.net, example.input, example.cotangent
    eager = forward_backward(net, net, fresh_input(x), cotangent)
    scale = max(t.abs().max().item() for t in (eager[0], *eager[1].values()))
    nudged = nudged_runs(net, x, cotangent)
    for name in ("layer1.weight", "layer2.weight"):
        assert eager[1][name].abs().max() < 1e-12 * scale  # cancelled
        zero = (eager[0], {**eager[1], name: torch.zeros_like(eager[1][name])})
        assert judge(zero, eager, probe=lambda: nudged) is None
        off = (eager[0], {**eager[1], name: eager[1][name] + 1e-11 * scale})  # a thousand times eager's spread
        assert isinstance(judge(off, eager, probe=lambda: nudged), GradientDivergence)
    # A clean float64 tensor keeps its sensitivity: the last norm's bias gradient (the cotangent's sum) 1e-8 off.
    bias = eager[1]["layer2.bias"]
    assert bias.abs().max() > 1e-3 * scale
    assert judge((eager[0], {**eager[1], "layer2.bias": bias * (1 + 1e-8)}), eager, probe=lambda: nudged) is not None


class _AttentionOverOneValue(torch.nn.Module):
    """Attention weights over keys that differ, on values that do not, with its softmax in ``softmax_dtype`` (float32
    in transformers' eager attention, whatever the model's dtype): the keys' gradient is 0 in truth, since the
    weights sum to 1, and what eager computes is the softmax's rounding."""

    def __init__(self, softmax_dtype: torch.dtype) -> None:
        super().__init__()
        self.keys = torch.nn.Linear(8, 8, dtype=torch.float64)
        self.softmax_dtype = softmax_dtype

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        weights = torch.softmax(self.keys(x).to(self.softmax_dtype), dim=-1).to(x.dtype)
        return weights @ torch.ones(8, 4, dtype=x.dtype)


# Found by `make campaign` (the training family's tiny phi model in float64, tokens all alike): thunderfx's q_proj
# gradient -2.79e-09 where eager's was -1.20e-09, both the float32 softmax's rounding of a truth of 0, judged a
# divergence while the float64 network's noise was its float32 twin's error scaled by eps64/eps32.
def test_a_float64_network_computing_in_float32_inside_has_float32_noise_and_a_real_error_still_fails():
    torch.manual_seed(0)
    net, x = _AttentionOverOneValue(torch.float32), torch.randn(3, 8, dtype=torch.float64, requires_grad=True)
    cotangent = torch.randn(3, 4, dtype=torch.float64)
    eager = forward_backward(net, net, fresh_input(x), cotangent)
    in_float64 = copy.deepcopy(net)
    in_float64.softmax_dtype = torch.float64  # another rounding of the same truth, as a compiler's may be
    other = forward_backward(in_float64, in_float64, fresh_input(x), cotangent)
    scale = max(t.abs().max().item() for t in (eager[0], *eager[1].values()))
    assert eager[1]["keys.weight"].abs().max() < 1e-6 * scale  # what the float32 softmax left of 0
    nudged = nudged_runs(net, x, cotangent)
    assert judge(other, eager, probe=lambda: nudged) is None
    off = eager[1]["keys.weight"] + 1e-3 * scale
    assert isinstance(
        judge((eager[0], {**eager[1], "keys.weight": off}), eager, probe=lambda: nudged), GradientDivergence
    )
    # Where the softmax is float64 too, float64's noise stays float64's: the float32 softmax's rounding fails there.
    assert judge(eager, other, probe=lambda: nudged_runs(in_float64, x, cotangent)) is not None


# -- autocast: float32 tensors that carry bfloat16's rounding --

# Found by a self-test's campaign on thunder 0.2.6 and taken for a thunder-general gradient divergence: thunderfx's
# embedding gradient under autocast, truth -1.59353, is -1.5859375 and eager's -1.59375, two bfloat16 values one ulp
# apart (34x eager's error by float32's rules).
AUTOCAST_ONE_ULP_APART = NetSpec(
    features=1,
    vocab=5,
    seed=141,
    autocast="forward",
    input_requires_grad=False,
    layers=[LayerSpec("linear", {"out_features": 5, "bias": True}), LayerSpec("relu"), LayerSpec("gelu")],
)


def test_a_float32_gradient_under_autocast_is_judged_by_bfloat16s_rounding():
    truth = torch.tensor([-1.59353, 0.5], dtype=torch.float64)
    eager, thunder = torch.tensor([-1.59375, 0.5]), torch.tensor([-1.5859375, 0.5])
    assert mismatch(thunder, eager, truth, 1.6, sensitivity=0.0) is not None  # float32's rules
    assert mismatch(thunder, eager, truth, 1.6, sensitivity=0.0, precision=torch.bfloat16) is None
    assert mismatch(thunder, eager, truth, 1.6, sensitivity=0.0, precision=torch.float64) is not None  # not wider
    wrong = thunder.clone()
    wrong[1] = 0.52  # 4% off: a wrong gradient still fails under autocast
    assert mismatch(wrong, eager, truth, 1.6, sensitivity=0.0, precision=torch.bfloat16) is not None


def test_the_autocast_network_thunder_rounds_one_ulp_apart_passes_and_a_fault_in_it_still_fails():
    assert AUTOCAST_ONE_ULP_APART.precision == "bfloat16"
    assert check_spec(AUTOCAST_ONE_ULP_APART).failure is None
    layers = [*AUTOCAST_ONE_ULP_APART.layers, LayerSpec("tanh")]
    spec = dataclasses.replace(AUTOCAST_ONE_ULP_APART, layers=layers, checkpoints=[CheckpointSpec(3, 4)])
    with injected("tanh-grad-x2"):
        assert isinstance(check_spec(spec).failure, GradientDivergence)


def test_low_precision_error_is_an_accuracy_gap_only_when_thunder_is_right_one_precision_up():
    reference, eager = _bfloat16()
    truth = (reference.view(8, 8).sum(0), {"input": reference})
    expected = (eager.view(8, 8).sum(0), {"input": eager})
    thunder = (expected[0].clone(), {"input": (reference * 1.05).to(torch.bfloat16)})
    gap = judge(thunder, expected, truth, probe=lambda: [], right_one_precision_up=lambda: True)
    assert isinstance(gap, AccuracyGap) and gap.ratio > 4 and "right one precision up" in str(gap)
    wrong = judge(thunder, expected, truth, probe=lambda: [], right_one_precision_up=lambda: False)
    assert isinstance(wrong, GradientDivergence)


# Found by the cancellation hunt (issue 46): a bfloat16 layer_norm of width 2, whose input gradient cancels (truth
# +-3.3e-4 beside an output of scale 1). Thunderfx's (-0.031, -0.016) is 4 bfloat16 ulps of the example's scale off
# and right in float32: an accuracy gap of thunder's, which measured against its own scale (93x) was a divergence.
@pytest.mark.parametrize(("thunder_input_gradient", "gap"), [((-0.03125, -0.015625), True), ((-0.5, 0.25), False)])
def test_a_cancellation_is_an_accuracy_gap_by_the_example_s_scale(thunder_input_gradient, gap):
    truth = (torch.tensor([0.99976, -0.99976], dtype=torch.float64), {"input": torch.tensor([-3.332e-4, 3.332e-4])})
    truth = (truth[0], {"input": truth[1]["input"].double()})
    expected = (torch.tensor([1.0, -1.0]).bfloat16(), {"input": torch.tensor([-1.2e-3, 1.2e-3]).bfloat16()})
    thunder = (expected[0].clone(), {"input": torch.tensor(thunder_input_gradient).bfloat16()})
    failure = judge(thunder, expected, truth, probe=lambda: [], right_one_precision_up=lambda: True)
    assert isinstance(failure, AccuracyGap if gap else GradientDivergence), failure
    wrong_in_float32 = judge(thunder, expected, truth, probe=lambda: [], right_one_precision_up=lambda: False)
    assert isinstance(wrong_in_float32, GradientDivergence)


# Found by the cancellation hunt: center of a width-1 matmul makes everything after it constant, and batch_center at the
# end makes every output and gradient 0 in truth (1e-17); thunderfx's bfloat16 rounding left 2.4e-3 where eager's left
# less, and with the example's scale 1e-17 no slack was left. Such a network is judged at its inputs' scale.
ALL_ZERO_IN_TRUTH = NetSpec(
    features=2,
    batch=4,
    dtype="bfloat16",
    seed=65536,
    layers=[
        LayerSpec("matmul", {"out_features": 1}),
        LayerSpec("center"),
        LayerSpec("tanh"),
        LayerSpec("relu"),
        LayerSpec("mlp", {"activation": "selu", "hidden": 2, "out_features": 2}),
        LayerSpec("gelu"),
        LayerSpec("batch_center"),
    ],
    checkpoints=[CheckpointSpec(0, 1), CheckpointSpec(1, 2), CheckpointSpec(2, 4), CheckpointSpec(5, 6)],
)


def test_a_network_zero_in_truth_everywhere_is_judged_at_its_inputs_scale():
    assert check_spec(ALL_ZERO_IN_TRUTH).failure is None
    example = build_example(ALL_ZERO_IN_TRUTH)
    eager, reference = run_eager(example), run_reference(example)
    gradients = dict(eager[1])
    gradients["layer4.2.bias"] = torch.full_like(gradients["layer4.2.bias"], 0.25)  # 32 ulps of the input's scale
    assert isinstance(judge((eager[0], gradients), eager, reference, probe=lambda: []), GradientDivergence)


@pytest.mark.parametrize("wrong", ["30% low", "largest element zeroed"])
def test_a_large_low_precision_error_is_wrong_even_where_thunder_is_right_one_precision_up(wrong):
    reference, eager = _bfloat16()
    truth = (reference.view(8, 8).sum(0), {"input": reference})
    expected = (eager.view(8, 8).sum(0), {"input": eager})
    gradient = (reference * 0.7).to(torch.bfloat16) if wrong == "30% low" else eager.clone()
    if wrong == "largest element zeroed":
        gradient[reference.abs().argmax()] = 0
    thunder = (expected[0].clone(), {"input": gradient})
    failure = judge(thunder, expected, truth, probe=lambda: [], right_one_precision_up=lambda: True)
    assert isinstance(failure, GradientDivergence), failure


SOFTMAX_ENTRY = "softmax-bfloat16-grad-inaccurate"


def test_a_new_low_precision_bug_in_an_op_with_a_known_gap_is_reported_as_new(tmp_path):
    # A bfloat16-only fault (right in float32) 30% off in thunder's softmax gradient, on the registered spec of the
    # softmax entry: it was an "accuracy" failure, 86x eager's error, attributed to that entry. Now it is a wrong
    # result outside the entry's band, reported as new and naming the entry it resembles.
    spec = recorded_spec(SOFTMAX_ENTRY)
    known = known_issues_for(spec)
    assert [issue.id for issue in known] == [SOFTMAX_ENTRY]
    assert known[0].reproduced_by(check_spec(spec).failure, spec)  # the entry's own bug, inside its band
    campaign = Campaign(CampaignConfig(run_dir=tmp_path))
    with injected("softmax-low-precision-grad-x0.7"):
        outcome = check_spec(spec)
        assert isinstance(outcome.failure, GradientDivergence), outcome.failure
        # The entry has a fix (issue 47): the failure is judged again with it applied, the fault still in thunder,
        # and fails there: new (a fault in the op a fix touches is not masked by the fix).
        assert campaign.record(outcome, known) is False
    assert any(f"resembles known issue {SOFTMAX_ENTRY}, but is not it" in line for line in outcome.failure.resembles)


def test_a_fault_in_thunder_is_no_accuracy_gap_since_it_is_wrong_in_float32_too():
    with injected("tanh-grad-x1.01"):
        failure = check_spec(NetSpec(features=64, batch=2, dtype="bfloat16", **_tanh_in_a_checkpoint())).failure
    assert isinstance(failure, GradientDivergence)


def _tanh_in_a_checkpoint() -> dict:
    return {"layers": [LayerSpec("tanh")], "checkpoints": [CheckpointSpec(0, 1)]}


# -- harness errors are ours --


def test_an_exception_in_the_harness_code_on_the_thunder_path_is_a_harness_error(monkeypatch):
    # A bug of ours in reading thunder's compile report (fuzz/run/runner.py), after thunder ran fine.
    monkeypatch.setattr(fuzz.run.runner, "CompileReport", lambda: None)
    with pytest.raises(
        HarnessError, match=r"the harness raised TypeError in compile_report \(runner.py:\d+\)"
    ) as raised:
        check_spec(TANH_IN_A_CHECKPOINT)
    assert not isinstance(raised.value, ThunderCrash) and isinstance(raised.value.__cause__, TypeError)


# -- failure ids and folders --


def _crash(message: str, error_type: str = "RuntimeError") -> ThunderCrash:
    return ThunderCrash(f"thunderfx raised {error_type}: {message}")


def test_failure_ids_tell_dtypes_and_messages_apart_but_not_sizes():
    base = TANH_IN_A_CHECKPOINT
    crash = _crash("shape [1] is invalid for input of size 16")
    other_size = NetSpec(features=9, batch=3, layers=base.layers, checkpoints=base.checkpoints)
    assert failure_id(base, crash) == failure_id(other_size, _crash("shape [1] is invalid for input of size 81"))
    assert failure_id(base, crash) != failure_id(NetSpec(**{**base.__dict__, "dtype": "bfloat16"}), crash)
    assert failure_id(base, crash) != failure_id(base, _crash("expected scalar type Float but found Double"))
    assert crash.crash_signature == "RuntimeError: shape [#] is invalid for input of size #"
    assert _crash("at 0x7f3a12 bad").crash_signature == _crash("at 0x5e0011 bad").crash_signature
    grad = GradientDivergence("grad of input: max abs diff 1")
    assert failure_id(base, grad) != failure_id(base, GradientDivergence("output: max abs diff 1"))


def test_a_crash_dynamo_wraps_is_told_apart_by_what_it_wraps_and_reads_as_the_same_crash_unwrapped():
    def wrapping(inner: str) -> ThunderCrash:
        backend = "backend='<thunder.dynamo.compiler.ThunderCompiler object at 0x7f1a2b>' raised:"
        return _crash(f"{backend}\n{inner}\n\nWhile executing %v1", "BackendCompilerFailed")

    splitter = wrapping("NotImplementedError: argument of type: <class 'torch._C._InferenceMode'>")
    fallback = wrapping("RuntimeError: <weakref at 0x7f53; to 'torch.storage.UntypedStorage' at 0x7f54>")
    assert splitter.crash_signature == "NotImplementedError: argument of type: <class 'torch._C._InferenceMode'>"
    assert fallback.crash_signature != splitter.crash_signature
    # thunder 0.2.6 raises one bug while dynamo compiles, a nightly after: one signature
    grad = "element 0 of tensors does not require grad and does not have a grad_fn"
    assert wrapping(f"RuntimeError: {grad}").crash_signature == _crash(grad).crash_signature


def test_a_second_network_with_the_same_failure_id_never_overwrites_the_first(tmp_path):
    crash = _crash("boom")
    first = write_failure(tmp_path, TANH_IN_A_CHECKPOINT, crash, "fixed")
    other = NetSpec(
        features=7, batch=2, layers=TANH_IN_A_CHECKPOINT.layers, checkpoints=TANH_IN_A_CHECKPOINT.checkpoints
    )
    second = write_failure(tmp_path, other, crash, "fixed")
    assert second.parent == first / "variants" and second != first
    assert NetSpec.from_json((first / "spec.json").read_text()) == TANH_IN_A_CHECKPOINT
    assert NetSpec.from_json((second / "spec.json").read_text()) == other
    assert write_failure(tmp_path, TANH_IN_A_CHECKPOINT, crash, "fixed") == first  # the same network: same folder


# -- repro.py: exit 0 / 1 / 2, and confirmation in a fresh interpreter --


def _repro_exit(directory, env=None) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": "", **(env or {})}
    return subprocess.run(
        [sys.executable, "repro.py"], cwd=directory, env=env, capture_output=True, text=True, timeout=300
    )


@pytest.fixture(scope="module")
def fault_failure_folder(tmp_path_factory):
    """The failure folder of tanh-grad-x2 in a checkpoint, found with the fault in this process only."""
    with injected("tanh-grad-x2"):
        failure = check_spec(TANH_IN_A_CHECKPOINT).failure
    assert isinstance(failure, GradientDivergence)
    return write_failure(tmp_path_factory.mktemp("repro"), TANH_IN_A_CHECKPOINT, failure, "fixed"), failure


def test_the_repro_exits_2_when_it_cannot_run_or_another_failure_shows(fault_failure_folder, tmp_path):
    directory, _ = fault_failure_folder
    source = (directory / "repro.py").read_text()
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "repro.py").write_text(source.replace("import torch\n", "import torch\nimport no_such_module\n", 1))
    run = _repro_exit(broken)
    assert run.returncode == 2 and "COULD NOT RUN" in run.stdout, run.stdout + run.stderr[-2000:]
    other = tmp_path / "other"
    other.mkdir()
    (other / "repro.py").write_text(source.replace("EXPECTED_CLASS = 'gradient-divergence'", "EXPECTED_CLASS = 'x'"))
    run = _repro_exit(other, fault_everywhere("tanh-grad-x2"))
    assert run.returncode == 2 and "OTHER FAILURE: gradient-divergence" in run.stdout, run.stdout[-2000:]


def test_a_failure_of_this_process_alone_is_not_confirmed_and_one_in_thunder_is(fault_failure_folder, monkeypatch):
    directory, failure = fault_failure_folder
    polluted = confirm(directory, failure, 300)  # the fresh interpreter has no fault: thunder matches there
    assert not polluted.confirmed and "exit status 0" in polluted.how
    for name, value in fault_everywhere("tanh-grad-x2").items():
        monkeypatch.setenv(name, value)
    confirmed = confirm(directory, failure, 300)
    assert confirmed.confirmed and "exit status 1" in confirmed.how
    print(f"confirmation took {polluted.seconds} s (not confirmed) and {confirmed.seconds} s (confirmed)")
    assert "REPRODUCED" in (directory / "confirmation.txt").read_text()


# -- known issues attributed precisely --

# inplace-silu-wrong-grad's trigger (outside the checkpoint), then a tanh inside one.
SILU_THEN_TANH = NetSpec(
    features=1,
    batch=1,
    layers=[LayerSpec("linear_silu_inplace", {"out_features": 1}), LayerSpec("tanh")],
    checkpoints=[CheckpointSpec(1, 2)],
)


def test_a_known_issue_without_a_fix_explains_its_own_failure_by_its_trigger(tmp_path):
    # hardsigmoid-float64-grad-imprecise has no fix: its identity is still its trigger and band (one with a fix is
    # credited by it, tests/unit/test_fixes.py)
    campaign = Campaign(CampaignConfig(run_dir=tmp_path))
    spec = recorded_spec("hardsigmoid-float64-grad-imprecise")
    known = known_issues_for(spec)
    assert [issue.id for issue in known] == ["hardsigmoid-float64-grad-imprecise"]
    outcome = check_spec(spec)
    assert campaign.record(outcome, known) is True  # expected: it goes away without the hardsigmoid
    assert campaign.stats.known_explained_failures == campaign.stats.known_class_failures == 1


def test_a_second_fault_in_a_network_with_a_known_trigger_is_still_reported(tmp_path):
    campaign = Campaign(CampaignConfig(run_dir=tmp_path))
    with injected("tanh-grad-x2"):
        outcome = check_spec(SILU_THEN_TANH)
        assert isinstance(outcome.failure, GradientDivergence)  # the class inplace-silu-wrong-grad claims
        assert campaign.record(outcome, known_issues_for(SILU_THEN_TANH)) is False
    # The in-place SiLU's band spans 0.06x to 7.8x (a width-1 Linear's reproduction, admitted), so twice the tanh's
    # gradient can fall inside it: the network without the SiLU still fails, and the failure is reported as new.
    stats = campaign.stats
    assert stats.known_explained_failures == 0
    assert stats.known_class_failures + stats.known_resembling_failures == 1


class _AddsOneInPlace(torch.nn.Module):
    def forward(self, x):
        return x.add_(1)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_the_probe_measures_eager_on_copies_its_own_run_has_not_mutated(dtype):
    # The nudged truth used to be computed after the nudged run had added 1 to its input in place: eager looked
    # hugely noisy there, and a 20% wrong output and weight gradient passed once the probe ran.
    torch.manual_seed(0)
    net = torch.nn.Sequential(_AddsOneInPlace(), torch.nn.Linear(6, 6)).to(dtype)
    x, cotangent = torch.randn(2, 6, dtype=dtype), torch.randn(2, 6, dtype=dtype)
    eager_net = copy.deepcopy(net)
    eager = forward_backward(eager_net, eager_net, fresh_input(x), cotangent)
    reference = float64_reference(net, x, cotangent) if dtype != torch.float64 else None
    wrong = (eager[0] * 1.2, {name: t * 1.2 if name == "1.weight" else t for name, t in eager[1].items()})
    forward, gradients = compare(wrong, eager, reference, lambda: nudged_runs(net, x, cotangent))
    assert [m.name for m in forward] == ["output"] and [m.name for m in gradients] == ["grad of 1.weight"]
