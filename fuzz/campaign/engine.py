"""A fuzz campaign's per-example bookkeeping, independent of pytest: run, judge, count, write failures.

Its options: `fuzz.campaign.config`; its time budget: `fuzz.campaign.budget`; where its files go:
`fuzz.report.run_folder`; what its summary says: `fuzz.report.summary`; what it does with a failure:
`fuzz.campaign.findings`.
"""

from __future__ import annotations

import contextlib
import math
import sys
import time
import traceback
from collections.abc import Sequence
from dataclasses import replace
from functools import cached_property
from pathlib import Path
from typing import Any

from hypothesis import event, reject, target
from hypothesis import strategies as st

from fuzz.campaign.budget import ItemBudget
from fuzz.campaign.config import CampaignConfig
from fuzz.campaign.families import GENERAL, DrawOptions, Family
from fuzz.campaign.findings import FailureWriter
from fuzz.campaign.known import KnownBugs
from fuzz.generate.coverage import traits
from fuzz.generate.draws import OP_KINDS
from fuzz.generate.spec import DTYPES, NetSpec
from fuzz.generate.spec_parts import GRAD_MODES
from fuzz.generate.sweep import CI_SWEEP_CASES, sweep_specs
from fuzz.judge.batch import batchable, judged_in_batch
from fuzz.judge.failures import ExampleTimeout, ParityFailure
from fuzz.judge.outcome import VERDICT_CUT, Outcome
from fuzz.judge.thunder_runs import VerdictCut
from fuzz.judge.verdict import check_spec
from fuzz.registry.issue import KnownIssue, installed_thunder
from fuzz.registry.known_issues import known_issues_for
from fuzz.report.failures import spec_digest
from fuzz.report.op_family import fallback_report, op_family_summary
from fuzz.report.run_folder import RunFolder, write_atomically
from fuzz.report.stats import CampaignStats, op_key
from fuzz.report.summary import ItemResults, build_summary
from fuzz.run.runner import on_phase_change
from fuzz.run.stops import interrupted, stop_if_interrupted

_STATS_EVERY_S = 10.0
_REMEMBERED_OUTCOMES = 512  # per item; outcomes hold no tensors
SHORTENED = "over its time limit, shortened while shrinking"


class Campaign:
    """Bookkeeping of the examples one process runs, the budget for new ones (`fuzz.campaign.budget.ItemBudget`), and
    failure artifacts."""

    def __init__(self, config: CampaignConfig, workers: int = 1, worker: str = "main") -> None:
        self.config = config
        self.folder = RunFolder(config.run_dir)
        self.worker = worker
        self.stats = CampaignStats()
        self.started = config.started_at or time.time()  # the command's start (the summary's wall time counts from it)
        self._stats_written = 0.0
        self.budget = ItemBudget(config.minutes, workers, config.timeout_s, config.started_at)
        self.budget.set_items(config.shards)
        self._outcomes: dict[str, tuple[Outcome, bool]] = {}  # spec JSON -> outcome, reproduced a known issue
        self.items = ItemResults()  # the controller's record of how each test item ended
        self._progress_examples = 0  # examples of the last progress line
        self.latest_problem: str | None = None  # why <root>/latest could not point at this run
        self.summary_exit_status: int | None = None  # the exit status the written summary's result agrees with
        on_phase_change(lambda phase: self.folder.mark_phase(self.worker, phase))
        self.known_bugs = KnownBugs(config.converter, self.budget, self.stats, self._checked, self._in_flight)
        self.findings = FailureWriter(
            config, self.folder, self.stats, self.budget, self.known_bugs, self._in_flight, worker, self.started
        )

    def start_item(self, sweep: bool = False, weight: float = 1.0) -> None:
        """A new test item (shard; ``sweep``: of the op sweep) starts: its share of the budget (``weight`` times a
        shard's), nothing remembered from the last one."""
        if weight:  # a campaign item (`fuzz.campaign.items.budget_weight`)
            self.stats.item_started()
        started = self.folder.mark_item_started(self.worker, sweep, weight) if self.config.minutes and weight else None
        self.budget.start_item(sweep, weight, started)
        self._outcomes.clear()

    def run_example(self, spec: NetSpec, family: Family = GENERAL, member: int = 0) -> ParityFailure | None:
        """The harness's whole path for one drawn spec of ``family`` inside a Hypothesis test: run, judge, count.

        Returns the failure unless it is an expected one (a known issue it reproduced); rejects
        (`hypothesis.reject`) a spec it does not run or that turned out invalid. A family with its own time limit
        (a slice of slow networks) runs a slow known issue it matches under it, not skipped. ``member``: which of
        the test call's networks it is (`judged_in_batch`: Hypothesis takes one score per label).
        """
        stop_if_interrupted()
        limit_s = family.limit_s
        for trait in [family.coverage, *traits(spec)]:
            event(trait)
        known = known_issues_for(spec)
        if limit_s is None and self.known_bugs.skipped(known):
            event(f"skipped, known issue: {', '.join(issue.id for issue in known)}")
            reject()
        outcome, reproduced = self._outcome(spec, known, limit_s)
        self.budget.count(outcome, cut=outcome.invalid_reason == SHORTENED or outcome.cut_short)
        if not outcome.valid:
            event(f"invalid: {outcome.invalid_reason}")
            reject()
        event("thunder compiled the whole network" if outcome.compiled else "thunder fell back")
        for index, layer in enumerate(spec.layers):  # the op family's coverage cells, as statistics
            if "op" in layer.params and spec.checkpointed(index):
                where = "a compiled checkpoint" if outcome.compiled else "a checkpoint thunder fell back on"
                event(f"op {op_key(layer.params)} in {where}")
        # (Hypothesis takes finite scores only: a non-finite error is the largest there is.) A known bug's error steers
        # nothing: scored, it drew a program run's search to the known bug's structure (30 of its 244 examples were
        # inplace-update-in-checkpoint-wrong-grad's, and none held a checkpoint of aliased inputs, 3% of random draws).
        score = 0.0 if reproduced else outcome.discrepancy
        score = score if math.isfinite(score) else sys.float_info.max
        target(score, label="largest relative error of thunderfx" + (f" #{member}" if member else ""))
        if outcome.converters_disagree:
            event("stock and fixed converters disagree")
        if known:
            event(f"known issue {'reproduced' if reproduced else 'did not reproduce'}: {known[0].id}")
        return None if reproduced else outcome.failure

    def judged_in_batch(self, specs: list[NetSpec]) -> list[NetSpec]:
        """Judge those of ``specs`` a batch can (`fuzz.judge.batch`: one thunderfx compile for them all), counting each
        it judged as an example; returns the others, in order, for `run_example` one by one: all of them while the
        item shrinks a failure, or where fewer than two can share a batch."""
        stop_if_interrupted()
        if self.budget.failures:
            return specs
        unseen = {spec.to_json(): spec for spec in specs if spec.to_json() not in self._outcomes}
        batch = [spec for spec in unseen.values() if batchable(spec) and not known_issues_for(spec)]
        if len(batch) < 2:
            return specs
        limit = self.budget.example_timeout_s()
        # (Should the process die in the batch, its first member is named: a worker crash, unconfirmed.)
        with self._in_flight(batch[0], limit and limit * len(batch)):
            outcomes = judged_in_batch(
                batch, self.config.converter, limit, self.budget.capped(limit and limit * len(batch)), self.budget.end
            )
        judged = set()
        for spec, outcome in zip(batch, outcomes, strict=True):
            if outcome is not None:
                self.budget.count(outcome)
                self.record(outcome)
                self.stats.batched += 1
                self._outcomes[spec.to_json()] = outcome, False
                judged.add(spec.to_json())
        self.stats.sent_alone += len(batch) - len(judged)
        return [spec for spec in specs if spec.to_json() not in judged]

    def _outcome(
        self, spec: NetSpec, known: Sequence[KnownIssue], limit_s: float | None = None
    ) -> tuple[Outcome, bool]:
        """``spec``'s outcome, counted, and whether it reproduced a known issue; from memory if the item ran it before.

        Shrinking asks for the same network many times (choices that the spec does not depend
        on, or that validation resets, differ); those repeats cost nothing. While the item
        shrinks a failure, a network over the shrinking time limit is rejected, not reported.
        """
        key = spec.to_json()
        if (seen := self._outcomes.get(key)) is not None:
            self.stats.repeats += 1
            return seen
        limit = self.budget.shrinking_timeout_s()
        shrinking = limit != self.config.timeout_s
        outcome = self._checked(spec, limit_s if limit_s and not shrinking else limit, shrinking, rerun=not limit_s)
        outcome, reproduced = self._recorded(outcome, known)
        if outcome.failure is not None:
            _release_frames(outcome.failure)  # kept in memory: keep no tensors alive through its tracebacks
            if not reproduced:
                self.budget.failures.append(outcome)
        if len(self._outcomes) >= _REMEMBERED_OUTCOMES:  # the oldest pass (a failure's replay must find its outcome)
            oldest = next((k for k, (seen, _) in self._outcomes.items() if seen.failure is None), None)
            del self._outcomes[oldest if oldest is not None else next(iter(self._outcomes))]
        self._outcomes[key] = outcome, reproduced
        return outcome, reproduced

    def _checked(
        self,
        spec: NetSpec,
        limit_s: float | None,
        shrinking: bool = False,
        rerun: bool = True,
        verdict_only: bool = False,
    ) -> Outcome:
        """``spec`` run and judged under ``limit_s``, none of its thunderfx runs past the end of the budget (a verdict
        that end cuts short is none: invalid), recorded as in flight. Where ``shrinking`` shortened the limit, a
        time-out only rejects the example; otherwise it is run a second time (when ``rerun`` and the budget has room
        for it) before it counts. ``verdict_only``: only whether it fails (a known fix's judgement): a failure is not
        triaged, and under ``--converter both`` the stock converter is not run."""
        rerun = rerun and not shrinking and self.budget.room_for(2 * (limit_s or 0))
        converter = self.config.converter
        converter = "fixed" if verdict_only and converter == "both" else converter
        with self._in_flight(spec, self.budget.capped(limit_s)):
            outcome = check_spec(
                spec,
                converter=converter,
                timeout_s=limit_s,
                rerun_timeouts=rerun,
                deadline=self.budget.end,
                triaged=not verdict_only,
            )
        if shrinking and isinstance(outcome.failure, ExampleTimeout):
            return replace(outcome, valid=False, invalid_reason=SHORTENED, failure=None)
        return outcome

    def _in_flight(self, spec: NetSpec, limit_s: float | None = None) -> contextlib.AbstractContextManager[None]:
        """Record ``spec`` as the one this process is running under ``limit_s`` (default: the campaign's time limit),
        for `record_worker_crash` should it die."""
        return self.folder.running(self.worker, spec, limit_s or self.config.timeout_s)

    @property
    def op_kinds(self) -> tuple[str, ...]:
        """The op family's kinds this campaign draws (`--fuzz-layers`)."""
        return tuple(kind for kind in OP_KINDS if self.config.kinds is None or kind in self.config.kinds)

    @property
    def draw_options(self) -> DrawOptions:
        """What this campaign's options say about drawing (`fuzz.campaign.families.DrawOptions`)."""
        config = self.config
        kinds, ops, dtypes = config.kinds, config.ops, config.dtypes or DTYPES
        grad_modes = GRAD_MODES if config.grad_modes is None else config.grad_modes  # (empty: none)
        # The gate's slice (make test) draws programs of the vocabulary before issue 49: its grad modes, view ops and
        # catalog updates found thunder and torch failures the registry does not explain yet (docs/known-issues.md,
        # "not yet" and "partial"); the other profiles draw them.
        reach = config.profile != "ci"
        return DrawOptions(
            config.device,
            dtypes,
            kinds,
            ops,
            config.max_dim,
            grad_modes=grad_modes if reach else (),
            catalog_nodes=reach if config.catalog_nodes is None else config.catalog_nodes,
            structures=config.structures,
        )

    def strategy(self, family: Family, **options: Any) -> st.SearchStrategy[NetSpec]:
        """The networks this campaign draws of ``family`` (``options``: `DrawOptions` fields that differ)."""
        if family.strategy is None:
            raise ValueError(f"the {family.name} family's cases are listed (`sweep_cases`), not drawn")
        return family.strategy(replace(self.draw_options, **options))

    @cached_property
    def _sweep(self) -> list[NetSpec]:
        """The campaign's op sweep (`fuzz.generate.sweep`): a small slice under ``ci``, nothing under replay."""
        if self.config.profile == "replay" or not self.op_kinds:
            return []
        cases = sweep_specs(self.config.device, self.config.dtypes or DTYPES, self.op_kinds, self.config.ops)
        if self.config.profile == "ci":
            cases = cases[:: max(1, len(cases) // CI_SWEEP_CASES)][:CI_SWEEP_CASES]
        return cases

    def sweep_cases(self, shard: int) -> list[NetSpec]:
        """Shard ``shard``'s part of the op sweep."""
        return self._sweep[shard :: self.config.shards]

    def run_sweep_case(self, spec: NetSpec) -> ParityFailure | None:
        """Run one sweep case under the full time limit, count it, and write its failure at once (no shrinking:
        a sweep case is one op in one checkpoint already). Returns the failure, or None when it passed, was
        not run (out of budget, or a known issue excluded) or reproduced a known issue."""
        stop_if_interrupted()
        if self.budget.spent():
            return None
        known = known_issues_for(spec)
        if self.known_bugs.skipped(known):
            return None
        outcome, reproduced = self._recorded(self._checked(spec, self.config.timeout_s), known)
        if reproduced or outcome.failure is None:  # passed, or a known issue reproduced
            return None
        _release_frames(outcome.failure)
        self.findings.reduce_and_write(spec, outcome.failure)
        return outcome.failure

    def _recorded(self, outcome: Outcome, known: Sequence[KnownIssue]) -> tuple[Outcome, bool]:
        """`record` ``outcome``: it, or, where the end of the budget cut its known-issue check short, an outcome of
        no verdict; and whether it reproduced a ``known`` issue."""
        try:
            return outcome, self.record(outcome, known)
        except VerdictCut:
            found = outcome.failure.failure_class if outcome.failure is not None else ""
            reason = f"{VERDICT_CUT} (thunderfx had failed: {found}; the check for a known issue was cut)"
            outcome = replace(outcome, valid=False, invalid_reason=reason, failure=None)
            return outcome, self.record(outcome)

    def record(self, outcome: Outcome, known: Sequence[KnownIssue] = ()) -> bool:
        """Count ``outcome``; returns whether it reproduced a ``known`` issue its spec matches (an expected failure).

        Expected failures are counted per issue, not as failures, and do not extend the budget. A known-issue check
        the end of the budget cuts short raises `VerdictCut` before anything is counted.
        """
        expected = self.known_bugs.judge(outcome, known)
        self.stats.record(outcome, time.time() - self.started, expected=expected)
        if outcome.converter_ab is not None:
            self._record_converter_ab(outcome)
        if time.monotonic() - self._stats_written > _STATS_EVERY_S:  # for the progress line and a killed worker
            self.write_worker_stats()
        return expected

    def _record_converter_ab(self, outcome: Outcome) -> None:
        """Append the example's A/B record to the run's ``converter_ab.jsonl``."""
        record = {"spec_sha1": spec_digest(outcome.spec), "dtype": outcome.spec.dtype, **outcome.converter_ab.to_dict()}
        self.folder.append_ab_record(record)

    def record_known_issue_check(self, issue: KnownIssue, outcome: Outcome) -> tuple[str, bool]:
        """Count a re-test of ``issue``'s registered spec on the installed thunder; returns its verdict and whether
        that is what the entry's version record expects (`KnownIssue.status`)."""
        difference = issue.difference(outcome.failure, outcome.spec)
        verdict, as_expected = issue.status(difference is None, installed_thunder())
        if isinstance(outcome.failure, ExampleTimeout) and difference is not None:
            verdict = f"inconclusive: {outcome.failure}"  # a time-out says nothing about whether it is fixed
        elif difference is not None and not as_expected and outcome.failure is not None:
            verdict = f"fails outside its recorded signature ({difference}): record it again if thunder changed it"
        self.stats.known_issue_checks[issue.id] = verdict
        return verdict, as_expected

    def record_worker_crash(self, worker: str) -> Path | str | None:
        """The controller's part when xdist worker ``worker`` died (`FailureWriter.record_worker_crash`), its counters
        written where it wrote a failure."""
        dead = self.findings.record_worker_crash(worker)
        if isinstance(dead, Path):
            self.write_worker_stats()
        return dead

    def write_worker_stats(self) -> None:
        """Write this process's counters to the run folder (for the summary, the progress line, a dead worker)."""
        self.folder.write_worker_stats(self.worker, self.stats)
        self._stats_written = time.monotonic()

    def progress_line(self) -> str | None:
        """One line on the campaign so far (all processes); None before any example and while no new one ran (the
        campaign's shards are done while self-tests run on: no line repeating the same counts)."""
        merged = self.folder.merged_stats()
        if merged is None or merged.examples == self._progress_examples:
            return None
        self._progress_examples = merged.examples
        wall = time.time() - self.started
        own = time.time() - (merged.items_started_at or self.started)  # the campaign's own time (`make test`: not all)
        failures = sum(merged.failing_examples.values())
        return (
            f"[fuzz {wall:.0f} s] {merged.examples} examples, {merged.examples / max(own, 1e-9):.2f}/s, "
            f"valid {merged.valid / merged.examples:.1%}, compiled {merged.compiled}/{merged.valid}, "
            f"failing examples {failures}{f' {dict(merged.failing_examples)}' if failures else ''}"
        )

    def summary(self, exit_status: int = 0) -> dict[str, Any] | None:
        """Merge every process's counters and the items' ends into the summary; write it to the run folder.

        ``exit_status``: pytest's; the summary's ``result`` always agrees with it (see `ItemResults.result`).
        None, and nothing written, when no campaign item ran (a run of the self-tests alone leaves no run folder).
        """
        merged = self.folder.merged_stats()
        if merged is None and not self.items.campaign_items:
            return None
        summary = build_summary(self.config, merged or CampaignStats(), self.items, time.time() - self.started)
        if self.op_kinds:
            summary["op_family"] = op_family_summary(merged or CampaignStats(), self.op_kinds, self.config.ops)
            self.config.run_dir.mkdir(parents=True, exist_ok=True)
            write_atomically(self.config.run_dir / "op_fallbacks.txt", fallback_report(summary["op_family"]))
        if interrupted():  # stopped by a signal, also one while the summary was built (they only mark the run now)
            exit_status = 2
        summary["result"] = self.items.result(exit_status, summary)
        self.latest_problem = self.folder.write_summary(summary)
        self.summary_exit_status = exit_status
        return summary


def _release_frames(failure: BaseException) -> None:
    """Clear the local variables of every frame in the tracebacks of ``failure`` and its causes.

    Thunder's exceptions hold its interpreter's frames, and with them traces and tensors. The
    tracebacks themselves (file and line, which Hypothesis tells bugs apart by) stay.
    """
    seen: set[int] = set()
    error: BaseException | None = failure
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        traceback.clear_frames(error.__traceback__)
        error = error.__cause__ or error.__context__
