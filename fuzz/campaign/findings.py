"""What a campaign does with a failure: reduce it, write its folder, list it, confirm it; and with a dead worker's
network (`FailureWriter`, owned by `fuzz.campaign.engine.Campaign`)."""

from __future__ import annotations

import contextlib
import shutil
import time
from collections.abc import Callable
from pathlib import Path

from hypothesis.control import current_build_context

from fuzz.campaign.budget import REDUCING_S, ItemBudget
from fuzz.campaign.config import CampaignConfig
from fuzz.campaign.known import KnownBugs, note_resemblance
from fuzz.generate.reduce import reduce_spec, valid, with_plumbing
from fuzz.generate.spec import NetSpec
from fuzz.judge.failures import ParityFailure, WorkerCrash
from fuzz.judge.thunder_runs import VerdictCut
from fuzz.judge.verdict import check_spec
from fuzz.registry.known_issues import known_issues_for
from fuzz.report.failures import confirm, failure_id, failure_record, spec_digest, write_failure
from fuzz.report.repro import repro_source
from fuzz.report.run_folder import DIED_OUTSIDE_THUNDER, REDUCING, UNSHRUNK, RunFolder, write_atomically
from fuzz.report.stats import CampaignStats, Confirmation
from fuzz.report.summary import STOPPED_FIRST
from fuzz.run.runner import THUNDER_PHASE, HarnessError, hard_limit
from fuzz.run.stops import stop_if_interrupted

# A confirmation needs about this long (a fresh interpreter imports thunder, compiles, then runs upstream.py: 15-25 s
# measured); with less of the budget left it is not started.
CONFIRM_MIN_S = 15.0
_BUDGET_ENDED = "the budget ran out (run repro.py by hand)"


class FailureWriter:
    """Writes a campaign's failures into its run folder and counts them in its statistics.

    ``budget``: what is left for reductions and confirmations; ``known_bugs``: whether a reduction step is a known
    issue's; ``in_flight(spec, limit_s)``: records the network this process runs (a death there is a finding);
    ``started``: the run's start (time.time()), for when each failure was found.
    """

    def __init__(
        self,
        config: CampaignConfig,
        folder: RunFolder,
        stats: CampaignStats,
        budget: ItemBudget,
        known_bugs: KnownBugs,
        in_flight: Callable[[NetSpec, float | None], contextlib.AbstractContextManager[None]],
        worker: str,
        started: float,
    ) -> None:
        self.config, self.folder, self.stats, self.budget = config, folder, stats, budget
        self.known_bugs, self._in_flight, self.worker, self.started = known_bugs, in_flight, worker, started
        self._unshrunk: dict[str, Path] = {}  # a failure class's first unshrunk folder, until its final one
        self._plumbing_reductions: dict[str, tuple[NetSpec, ParityFailure, bool]] = {}  # see `reduced`
        self._confirmations: dict[Path, Confirmation] = {}  # a final failure's folder -> its confirmation

    def record_worker_crash(self, worker: str) -> Path | str | None:
        """The controller's part when xdist worker ``worker`` died: write the network it was running.

        Returns the failure's directory when it died in thunder's phase (`fuzz.run.runner.in_phase`: a thunder finding);
        a one-line account when it died in another phase (eager PyTorch, the float64 reference, the nudged copies,
        our own steps: a harness error, never thunder's), its network written to ``died-outside-thunder/``; None
        when it was not running an example.
        """
        if (running := self.folder.take_running(worker)) is None:
            return None
        spec, elapsed, phase, limit = running
        if phase != THUNDER_PHASE:
            path = self.config.run_dir / DIED_OUTSIDE_THUNDER / f"{spec_digest(spec)}.json"
            path.parent.mkdir(parents=True, exist_ok=True)
            write_atomically(path, spec.to_json() + "\n")
            where = f"in phase {phase!r}" if phase else "in the harness's own steps"
            return f"the worker process died {elapsed:.0f} s into a network {where}, outside thunder: {path}"
        how = (
            f"past the hard time limit ({hard_limit(limit):g} s): a hang the per-example limit could not stop"
            if limit and elapsed >= hard_limit(limit)
            else "a crash in native code (segfault, abort) or a kill from outside"
        )
        failure = WorkerCrash(f"the worker process died {elapsed:.0f} s into this network, inside thunder: {how}")
        self.stats.failing_examples[failure.signature] += 1
        return self.write_final(spec, failure)

    def on_failure(self, spec: NetSpec, failure: ParityFailure) -> str:
        """Write the failure's artifacts; returns its repro source.

        Hypothesis's final replay of a shrunk failure goes to ``<artifacts>/<failure-id>/``. The
        first failure of each class is also written at once to ``<artifacts>/unshrunk/`` so an
        interrupted run keeps a repro; the final one replaces it.
        """
        if current_build_context().is_final:
            spec, failure = self.reduce_and_write(spec, failure, cut_short=bool(self.budget.cut_short))
        elif failure.signature not in self._unshrunk:
            unshrunk = self._write_failure(self.config.run_dir / UNSHRUNK, spec, failure)
            self._unshrunk[failure.signature] = unshrunk
        return repro_source(spec, failure, self.config.converter, self.config.executors)

    def reduce_and_write(
        self, spec: NetSpec, failure: ParityFailure, cut_short: bool = False
    ) -> tuple[NetSpec, ParityFailure]:
        """Reduce a failure (`reduced`, within what is left of the budget) and write it (`write_final`; listed as
        unshrunk where the budget ``cut_short`` Hypothesis's shrinking); returns what was written.

        On disk while it is reduced, in this process's own folder: should the worker die there, the summary lists it
        (`RunFolder.written_failures`)."""
        reducing = self._write_failure(
            self.config.run_dir, spec, failure, f"{REDUCING}-{self.worker}-{failure_id(spec, failure)}"
        )
        try:
            spec, failure, judged = self.reduced(spec, failure)
        except KeyboardInterrupt:  # the run is being stopped: keep the network as it came, unconfirmed
            self.write_final(spec, failure, confirming=False)
            raise
        finally:
            shutil.rmtree(reducing, ignore_errors=True)
        self.write_final(spec, failure, unshrunk=cut_short, reduced=judged)
        return spec, failure

    def write_final(
        self,
        spec: NetSpec,
        failure: ParityFailure,
        confirming: bool = True,
        unshrunk: bool = False,
        reduced: bool = False,
    ) -> Path:
        """Write a failure that is as small as it gets to its folder, list it in the summary, then confirm it in a
        fresh interpreter (unless turned off, or not ``confirming``); returns the folder. Listed first: a run stopped
        while confirming keeps it. Only a ``reduced`` network (`reduced` ran) blames its ops."""
        directory = self._write_failure(self.config.run_dir, spec, failure, reduced=reduced)
        unchecked = Confirmation(None, STOPPED_FIRST) if self.config.confirm else None
        listed = {**failure_record(spec, failure, directory, reduced), **({"unshrunk": True} if unshrunk else {})}
        record = self.stats.record_final_failure(listed, time.time() - self.started, unchecked)
        if unshrunk := self._unshrunk.pop(failure.signature, None):
            shutil.rmtree(unshrunk, ignore_errors=True)
        if confirming and self.config.confirm:
            # The same network again (another op whose plumbing fails alike, `reduced`): confirmed once.
            if (confirmation := self._confirmations.get(directory)) is None:
                full = hard_limit(self.config.timeout_s) if self.config.timeout_s else 600.0
                limit = min(full, self.budget.left_s())
                if limit < CONFIRM_MIN_S:
                    confirmation = Confirmation(None, f"not checked: {_BUDGET_ENDED}")
                else:
                    confirmation = self._confirmations[directory] = confirm(directory, failure, limit)
                    if confirmation.confirmed is False and "timed out" in confirmation.how and limit < full:
                        confirmation = Confirmation(None, f"not checked: {_BUDGET_ENDED} while it ran")
            self.stats.set_confirmation(record, confirmation)
        return directory

    def _write_failure(
        self, artifacts: Path, spec: NetSpec, failure: ParityFailure, name: str | None = None, reduced: bool = False
    ) -> Path:
        return write_failure(
            artifacts, spec, failure, self.config.converter, name, executors=self.config.executors, reduced=reduced
        )

    def _shows_the_new_bug(
        self, candidate: NetSpec, shown: ParityFailure | None, failure: ParityFailure, limit_s: float
    ) -> bool:
        """Whether ``candidate``, a smaller network of a new ``failure``, fails of that bug (``shown``: what it failed
        with): in the same class and triage, unexplained by the known issues it matches, and not cured by the known
        fixes. A step into a known bug's form is no step (measured: three of a nightly's findings reduced from new
        bugs to networks that pass with the fixes, reported as new). A known-issue check cut short is no step."""
        if shown is None or shown.signature != failure.signature:
            return False
        applying = known_issues_for(candidate)
        known = [issue for issue in applying if issue.reproduced_by(shown, candidate)]
        try:
            if known and self.known_bugs.explained(candidate, known, limit_s, others=applying):
                return False
            return not self.known_bugs.fixes_explain(candidate, limit_s)
        except VerdictCut:
            return False

    def reduced(self, spec: NetSpec, failure: ParityFailure) -> tuple[NetSpec, ParityFailure, bool]:
        """``spec`` reduced further (see `fuzz.generate.reduce`) with the failure it still shows in the same class, and
        whether every check of the reduction had a verdict: where the end of the budget cut one short (an op's twin or
        stand-in among them), what is left of the network blames nothing (a cut check is no pass).

        First its op layers' plumbing twins (`fuzz.generate.reduce.with_plumbing`): when the network fails alike with
        every op replaced by identity, the ops are not to blame, and a network whose plumbing failed so before (any
        op, this process) reduces to what that one did, without reducing again: the op sweep under a plumbing bug
        makes one failure, not one per op.
        """
        found: dict[int, ParityFailure] = {}
        cut: list[NetSpec] = []

        def still_fails(candidate: NetSpec) -> bool:
            # One run per check, within the reduction's own bound: a slow thunder error path ends the check. (One the
            # end of the budget cuts short is invalid: no step.) Each check is a safe point of a stopped run.
            stop_if_interrupted()
            limit = min(self.config.timeout_s or REDUCING_S, REDUCING_S)
            try:
                with self._in_flight(candidate, self.budget.capped(limit)):  # a death in thunder is a finding itself
                    outcome = check_spec(
                        candidate,
                        converter=self.config.converter,
                        timeout_s=limit,
                        rerun_timeouts=False,
                        deadline=self.budget.end,
                    )
            except HarnessError:
                raise
            except Exception:  # eager cannot run it (an op's smaller tensors no longer fit its other arguments)
                return False
            if outcome.cut_short:
                cut.append(candidate)
            if not self._shows_the_new_bug(candidate, outcome.failure, failure, limit):
                return False
            found[id(candidate)] = outcome.failure
            return True

        twin, plumbing = with_plumbing(spec), None
        if twin != spec and valid(twin) and still_fails(twin):
            spec, failure = twin, found[id(twin)]
            plumbing = failure_id(spec, failure)
            if (earlier := self._plumbing_reductions.get(plumbing)) is not None:
                return earlier
        # Within the budget, leaving the confirmation its time.
        seconds = max(0.0, min(REDUCING_S, self.budget.left_s() - CONFIRM_MIN_S))
        reduced = reduce_spec(spec, still_fails, max_seconds=seconds)
        if (reduced_failure := found.get(id(reduced))) is not None:
            note_resemblance(reduced_failure, reduced, known_issues_for(reduced))  # (a fresh run: noted again)
        result = reduced, reduced_failure or failure, not cut
        if plumbing is not None:
            self._plumbing_reductions[plumbing] = result
        return result
