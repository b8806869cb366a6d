"""What a campaign does around each example: remembering outcomes, the shrinking time limit."""

import json
import time
from pathlib import Path

import thunder.torch
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.control import current_build_context
from thunder.dynamo.utils import _torch_to_thunder_function_map

import fuzz.campaign.budget
import fuzz.report.run_folder
from fuzz.campaign.config import CampaignConfig
from fuzz.campaign.engine import SHORTENED, Campaign
from fuzz.generate.spec import CheckpointSpec, LayerSpec, NetSpec
from fuzz.generate.sweep import sweep_specs
from fuzz.judge.failures import GradientDivergence
from fuzz.judge.outcome import VERDICT_CUT
from fuzz.judge.verdict import check_spec
from fuzz.registry.files import recorded_spec
from fuzz.registry.known_issues import known_issues_for
from fuzz.report.failures import blames
from tests.faults import busy, injected, replaced


def _tanh(features: int = 3) -> NetSpec:
    return NetSpec(features, [LayerSpec("tanh")], [CheckpointSpec(0, 1)], batch=2)


def test_a_network_the_shard_already_ran_is_answered_from_memory(tmp_path):
    campaign = Campaign(CampaignConfig(run_dir=tmp_path))
    campaign.start_item()
    first, _ = campaign._outcome(_tanh(), ())
    again, _ = campaign._outcome(NetSpec.from_json(_tanh().to_json()), ())
    assert again is first and campaign.stats.examples == 1 and campaign.stats.repeats == 1
    campaign.start_item()  # a new shard starts afresh
    campaign._outcome(_tanh(), ())
    assert campaign.stats.examples == 2


def test_while_shrinking_a_step_far_slower_than_the_failure_is_rejected_not_reported(tmp_path, monkeypatch):
    monkeypatch.setattr(fuzz.campaign.budget, "SHRINKING_TIMEOUT_FLOOR_S", 2.0)
    campaign = Campaign(CampaignConfig(run_dir=tmp_path, timeout_s=60))
    campaign.start_item()
    assert campaign.budget.example_timeout_s() == 60
    with injected("tanh-grad-x2"):
        failing, _ = campaign._outcome(_tanh(), ())
    assert isinstance(failing.failure, GradientDivergence)
    limit = campaign.budget.example_timeout_s()
    assert limit == max(2.0, 4 * failing.seconds) < 60

    def hangs(a):
        busy(60)
        return a

    monkeypatch.setitem(_torch_to_thunder_function_map, torch.tanh, hangs)
    start = time.monotonic()
    slow, _ = campaign._outcome(_tanh(features=4), ())
    assert time.monotonic() - start < limit + 20
    assert not slow.valid and slow.invalid_reason == SHORTENED and slow.failure is None


def test_a_progress_line_only_when_examples_ran_since_the_last_one(tmp_path):
    campaign = Campaign(CampaignConfig(run_dir=tmp_path))
    assert campaign.progress_line() is None  # nothing ran yet
    campaign.start_item()
    campaign._outcome(_tanh(), ())
    campaign.write_worker_stats()
    assert "1 examples" in campaign.progress_line()
    assert campaign.progress_line() is None  # the shards are done while other tests run: no repeated line
    campaign._outcome(_tanh(2), ())
    campaign.write_worker_stats()
    assert "2 examples" in campaign.progress_line()


def _run_and_scored(campaign: Campaign, spec: NetSpec) -> tuple[object, dict]:
    """`Campaign.run_example` of ``spec`` in one Hypothesis call: what it returned and the scores it gave target()."""
    seen = []

    @settings(max_examples=1, database=None, deadline=None)
    @given(st.just(spec))
    def run(spec):
        seen.append((campaign.run_example(spec), dict(current_build_context().data.target_observations)))

    run()
    return seen[0]


def test_a_non_finite_error_is_a_failure_not_an_error_of_hypothesis(tmp_path):
    # Hypothesis's `target` takes finite scores only: a NaN gradient used to end the shard in InvalidArgument.
    campaign = Campaign(CampaignConfig(run_dir=tmp_path))
    campaign.start_item()
    nan_gradient = lambda op: lambda a: op(a) + (op(a) - thunder.torch.detach(op(a))) * float("nan")  # noqa: E731
    with replaced(torch.tanh, nan_gradient):
        found, _ = _run_and_scored(campaign, _tanh())
    assert found is not None and "non-finite elements" in str(found)


def test_a_known_bugs_error_steers_nothing_a_new_failures_steers_the_search(tmp_path):
    # Scored, a known bug drew a program run's search to its structure (target() maximizes the score): 30 of 244
    # examples were one known bug's, and none held the structure a fault self-test waited for.
    campaign = Campaign(CampaignConfig(run_dir=tmp_path, confirm=False))
    campaign.start_item()
    known, known_scores = _run_and_scored(campaign, recorded_spec("fallback-unused-output-zero-weight-grad"))
    with injected("tanh-grad-x2"):
        new, new_scores = _run_and_scored(campaign, _tanh())
    assert known is None and list(known_scores.values()) == [0.0], known_scores
    assert isinstance(new, GradientDivergence) and list(new_scores.values())[0] > 0.1, new_scores


def test_op_sweep_cases_whose_plumbing_fails_alike_are_one_failure_blamed_on_no_op(tmp_path):
    # A fault in tanh inside checkpoints: every op layer's `adapt` computes tanh. Two ops' sweep cases reduce (once)
    # to one network, tanh in a checkpoint, listed once; an op's own bug is still blamed on its op.
    campaign = Campaign(CampaignConfig(run_dir=tmp_path, confirm=False))
    campaign.start_item()
    # (Function forms: an in-place form on a clone meets a registered bug, inplace-op-on-clone-wrong-grad.)
    cases = [
        spec
        for spec in sweep_specs("cpu", ["float32"], ops=["abs", "neg"])
        if spec.layers[0].params["form"] == "function"
    ]
    with injected("tanh-grad-x2"):
        failures = [campaign.run_sweep_case(spec) for spec in cases[:2]]
    assert {case.layers[0].params["op"] for case in cases[:2]} == {"abs", "neg"}
    assert all(isinstance(failure, GradientDivergence) for failure in failures)
    campaign.write_worker_stats()
    summary = campaign.summary(exit_status=1)
    (listed,) = summary["failures"]
    spec = NetSpec.from_json((Path(listed["repro"]).parent / "spec.json").read_text())
    assert [layer.kind for layer in spec.layers] == ["tanh"] and spec.checkpointed(0), spec
    assert listed["found_by_shards"] == 2 and listed["blames"] is None and not listed["variants"]


def _abs_case() -> NetSpec:
    """The op sweep's first case of torch.abs in function form."""
    return next(s for s in sweep_specs("cpu", ["float32"], ops=["abs"]) if s.layers[0].params["form"] == "function")


def test_a_failure_whose_reduction_the_end_of_the_budget_cut_blames_no_op(tmp_path):
    # Hypothesis's shrinking was cut short and the budget ended before its reduction could check anything: its ops
    # were never replaced by their identity twins, so the op the sweep case draws is no culprit yet.
    ended = CampaignConfig(run_dir=tmp_path, confirm=False, minutes=1, started_at=time.time() - 90)
    campaign = Campaign(ended)
    campaign.start_item()
    case = _abs_case()
    with injected("tanh-grad-x2"):
        failure = check_spec(case).failure
        assert failure is not None and blames(case) == "op abs"
        campaign.findings.reduce_and_write(case, failure, cut_short=True)
    campaign.write_worker_stats()
    (listed,) = campaign.summary(exit_status=1)["failures"]
    assert listed["unshrunk"] and listed["blames"] is None, listed
    # Its folder's failure.json too (what the report, merge and a stopped run's summary read).
    assert json.loads((Path(listed["repro"]).parent / "failure.json").read_text())["blames"] is None


def test_the_op_sweep_gets_what_its_cases_need_at_most_half_the_budget_and_the_others_share_the_rest():
    total = 2 * (600 - fuzz.campaign.budget.CLOSING_S)  # worker-seconds of 10 minutes on 2 workers, closing taken out
    case_s, share = fuzz.campaign.budget.SWEEP_CASE_S, fuzz.campaign.budget.SWEEP_MAX_SHARE

    def item_s(items: float, sweep_items: int = 0, sweep_cases: int = 0, sweep: bool = False, weight: float = 1.0):
        budget = fuzz.campaign.budget.ItemBudget(minutes=10, workers=2, timeout_s=None)
        budget.set_items(items, sweep_items, sweep_cases)
        budget.start_item(sweep, weight)
        return budget.deadline - time.monotonic()

    # A whole sweep: more than half the budget; a few ops' sweep: the random families get the rest.
    assert abs(8 * item_s(24, 8, 2_000, sweep=True) - share * total) < 1
    assert abs(16 * item_s(24, 8, 2_000) - (1 - share) * total) < 1
    assert abs(8 * item_s(24, 8, 20, sweep=True) - 20 * case_s) < 1
    assert abs(16 * item_s(24, 8, 20) - (total - 20 * case_s)) < 1
    assert abs(8 * item_s(8, 8, 20, sweep=True) - total) < 1  # the sweep alone (-k op_sweep): the whole budget
    assert abs(16 * item_s(16) - total) < 1  # no sweep: an even split
    # 2 shards of 7 families, and a zoo test per architecture weighing 2/7: the family's share spread over the 7.
    assert abs(item_s(16, weight=2 / 7) - 2 / 7 * total / 16) < 1


def test_an_item_that_overran_shortens_the_later_ones_not_the_run():
    budget = fuzz.campaign.budget.ItemBudget(minutes=10, workers=1, timeout_s=None)
    budget.set_items(4)
    budget.start_item()
    assert abs(budget.deadline - time.monotonic() - budget.left_s() / 4) < 1
    budget.end -= 300  # (as if the first item had run 300 s, its share and more)
    budget.start_item()
    assert abs(budget.deadline - time.monotonic() - budget.left_s() / 3) < 1  # what is left, over the 3 to come


def test_items_share_what_all_processes_have_left_whichever_process_ran_the_op_sweep(tmp_path):
    # Two processes, 4 sweep items and 4 others. xdist may give all the sweep's items to one process: the other's items
    # then share the time the sweep does not need, not a guess of half of it each (they once got nothing at all).
    folder = fuzz.report.run_folder.RunFolder(tmp_path)
    sweeping, other = (fuzz.campaign.budget.ItemBudget(minutes=10, workers=2, timeout_s=None) for _ in range(2))
    for budget in (sweeping, other):
        budget.set_items(8, sweep_items=4, sweep_cases=100)  # the sweep needs 200 s of the 2 x 590 s
    for _ in range(4):
        sweeping.start_item(True, 1.0, folder.mark_item_started("gw0", True, 1.0))
    other.start_item(False, 1.0, folder.mark_item_started("gw1", False, 1.0))
    assert abs(other.deadline - time.monotonic() - (2 * 590 - 0) / 4) < 2


def test_the_budget_counts_from_the_commands_start_and_ends_every_item_there():
    # A process that started 100 s ago with a 2-minute budget: 10 s are left before the closing reserve.
    budget = fuzz.campaign.budget.ItemBudget(minutes=2, workers=1, timeout_s=120.0, started_at=time.time() - 100)
    assert abs(budget.left_s() - (120 - 100 - fuzz.campaign.budget.CLOSING_S)) < 1
    budget.set_items(1)
    budget.start_item()
    assert abs(budget.deadline - budget.end) < 0.01  # its share is what is left
    # No example runs past the end (a second at least), and a failure's shrinking stops FINISHING_S and REDUCING_S
    # before it.
    assert 9 <= budget.example_timeout_s() <= 10.5 and budget.capped(5.0) == 5.0
    budget.failures.append(object())
    assert not budget.may_generate() and budget.cut_short == 1
    late = fuzz.campaign.budget.ItemBudget(minutes=2, workers=1, timeout_s=120.0, started_at=time.time() - 130)
    assert late.example_timeout_s() == 1.0 and late.spent() is False  # (no item started: no deadline)
    late.set_items(1)
    late.start_item()
    assert late.spent()


def test_a_findings_shrinking_leaves_the_items_still_to_come_their_time(monkeypatch):
    def shrinking(items: int) -> tuple[fuzz.campaign.budget.ItemBudget, float, float]:
        budget = fuzz.campaign.budget.ItemBudget(minutes=20, workers=1, timeout_s=None)
        budget.set_items(items)
        budget.start_item()  # its share: what is left over the items
        budget.failures.append(object())
        assert budget.may_generate()  # found now: its shrinking starts
        return budget, time.monotonic(), budget.left_s()

    # (Hypothesis's shrinking of it ends REDUCING_S before its time to shrink does: the reduction's minute.)
    reducing = fuzz.campaign.budget.REDUCING_S
    budget, found, left = shrinking(4)  # 3 to come: half of what is left (4 of their shares would be more)
    monkeypatch.setattr(time, "monotonic", lambda: found + 0.5 * left - reducing - 1)
    assert budget.may_generate() and not budget.cut_short
    monkeypatch.setattr(time, "monotonic", lambda: found + 0.5 * left - reducing + 1)
    assert not budget.may_generate() and budget.cut_short == 1  # reduced in what is left of its time
    monkeypatch.undo()
    budget, found, left = shrinking(40)  # 39 to come: 4 of their shares, 4 / 40 of what is left
    monkeypatch.setattr(time, "monotonic", lambda: found + 0.1 * left - reducing - 1)
    assert budget.may_generate()
    monkeypatch.setattr(time, "monotonic", lambda: found + 0.1 * left - reducing + 1)
    assert not budget.may_generate() and budget.cut_short == 1
    monkeypatch.undo()
    last, found, left = shrinking(1)  # nothing to come: it shrinks until FINISHING_S and the reduction's minute
    monkeypatch.setattr(time, "monotonic", lambda: found + left - fuzz.campaign.budget.FINISHING_S - reducing - 1)
    assert last.may_generate()
    monkeypatch.setattr(time, "monotonic", lambda: found + left - fuzz.campaign.budget.FINISHING_S - reducing + 1)
    assert not last.may_generate() and last.cut_short == 1


def test_a_known_issue_check_the_end_of_the_budget_cuts_short_leaves_no_verdict_not_a_new_failure(tmp_path):
    # inplace_residual in a checkpoint: a registered bug, whose failure counts as known once the network without its
    # trigger passes. The end of the budget comes just after the example's own verdict, before that check runs.
    campaign = Campaign(CampaignConfig(run_dir=tmp_path, minutes=10))
    campaign.start_item()
    spec = NetSpec(3, [LayerSpec("inplace_residual"), LayerSpec("tanh")], [CheckpointSpec(0, 2)], batch=2)
    known = known_issues_for(spec)
    assert [issue.id for issue in known] == ["inplace-update-in-checkpoint-wrong-grad"]
    checked = campaign._checked

    def then_the_end(*args, **kwargs):
        outcome = checked(*args, **kwargs)
        campaign.budget.end = time.monotonic()
        return outcome

    campaign._checked = then_the_end
    outcome, reproduced = campaign._outcome(spec, known)
    assert not reproduced and outcome.failure is None and outcome.cut_short and not campaign.budget.failures
    reason = f"{VERDICT_CUT} (thunderfx had failed: forward-divergence; the check for a known issue was cut)"
    assert outcome.invalid_reason == reason
    assert campaign.stats.known_issues == {} and campaign.stats.invalid_reasons[outcome.invalid_reason] == 1


def test_a_reduction_whose_blame_check_the_end_of_the_budget_cuts_short_blames_nothing(tmp_path):
    # A tanh fault (the op's plumbing computes tanh too): the op's identity twin still fails, and its stand-in is what
    # would tell. The budget ends before the first check of the reduction: no check has a verdict, none is a pass.
    campaign = Campaign(CampaignConfig(run_dir=tmp_path, confirm=False))
    campaign.start_item()
    case = _abs_case()
    with injected("tanh-grad-x2"):
        failure = check_spec(case).failure
        assert failure is not None
        campaign.budget.end = time.monotonic()
        spec, failure, judged = campaign.findings.reduced(case, failure)
    assert spec == case and not judged
    campaign.findings.write_final(spec, failure, reduced=judged)
    campaign.write_worker_stats()
    (listed,) = campaign.summary(exit_status=1)["failures"]
    assert listed["blames"] is None and "in a network not reduced" in listed["cluster_label"], listed


def test_a_reduction_does_not_step_into_a_form_of_a_known_bug_that_the_known_fixes_cure(tmp_path):
    # In one checkpoint, a read of a clone after its update (inplace-update-in-checkpoint-wrong-grad's form: the
    # output wrong stock, right with its fix); in another, a tanh that a fault breaks. The network fails with every
    # fix applied (the fault), so it is new; deleting the tanh leaves a network of the same failure class that the
    # fixes cure: a known bug, which the reduction must not report as the new one (a nightly did, three times).
    layers = [("clone", [0]), ("add_", [1, 0]), ("mul", [1, 0]), ("tanh", [0])]
    spec = NetSpec(
        1,
        [LayerSpec(kind, reads=reads) for kind, reads in layers],
        [CheckpointSpec(0, 3), CheckpointSpec(3, 4)],
        batch=1,
        seed=144,
        outputs=[2, 1, 3, 4],
    )
    campaign = Campaign(CampaignConfig(run_dir=tmp_path, confirm=False))
    campaign.start_item()
    with injected("tanh-grad-x2"):
        failure = check_spec(spec).failure
        assert failure is not None and not campaign.known_bugs.fixes_explain(spec, 60)
        reduced, _, _ = campaign.findings.reduced(spec, failure)
    assert "tanh" in [layer.kind for layer in reduced.layers], reduced.to_json()


def test_a_database_filled_under_a_tests_old_key_is_moved_to_its_new_key(tmp_path):
    """`adopt_examples`: every corpus Hypothesis keeps under a key (failures, the secondary and pareto ones) moves."""
    from hypothesis.database import DirectoryBasedExampleDatabase

    from fuzz.campaign.database import adopt_examples

    database = DirectoryBasedExampleDatabase(tmp_path)
    old, new = b"old", b"new"
    for corpus, value in ((b"", b"a"), (b".secondary", b"b"), (b".pareto", b"c")):
        database.save(old + corpus, value)
    database.save(new, b"d")
    assert adopt_examples(database, old, new) == 3
    assert set(database.fetch(new)) == {b"a", b"d"} and list(database.fetch(new + b".secondary")) == [b"b"]
    assert list(database.fetch(new + b".pareto")) == [b"c"] and not list(database.fetch(old))
    assert adopt_examples(database, old, new) == 0  # the next run has nothing left to move


def test_a_campaign_draws_catalog_nodes_as_its_profile_says_unless_told():
    def draws(**options: object) -> tuple[bool, tuple[str, ...]]:
        drawn = Campaign(CampaignConfig(run_dir=Path("unused"), **options)).draw_options
        return drawn.catalog_nodes, drawn.grad_modes

    assert draws(profile="nightly")[0] and draws(profile="dev")[0]
    assert draws(profile="ci") == (False, ())
    assert draws(profile="nightly", catalog_nodes=False)[0] is False
    assert draws(profile="nightly", catalog_nodes=False, grad_modes=("autocast",)) == (False, ("autocast",))
