"""Whether a campaign's example is a known bug: by cause first (it passes on thunder with the known fixes applied,
`fuzz.registry.novelty`), else, for entries without a fix, by appearance (signature, band and trigger,
`fuzz.registry.issue.explained_by`); and which matching specs are not run at all (a slow entry's)."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from functools import cached_property

from fuzz.campaign.budget import ItemBudget
from fuzz.generate.spec import NetSpec
from fuzz.judge.failures import RESEMBLES, ParityFailure
from fuzz.judge.outcome import Outcome
from fuzz.judge.thunder_runs import VerdictCut
from fuzz.registry.fixes import Fix
from fuzz.registry.issue import KnownIssue, explained_by, installed_thunder
from fuzz.registry.novelty import credited_fixes, fixes_on, passes_with
from fuzz.report.stats import CampaignStats

FIXED_NOT = "it still fails with the entry's fix applied"
# The credit of a failing shrink step that passes with every known fix but with none of the entries tried first: a
# known bug, not narrowed (a chain of four fixes took ~25 thunderfx runs to narrow, a minute of a shard's shrinking).
NOT_NARROWED = "the known fixes together (not narrowed while shrinking)"
# Entries this process credited most recently, tried alone (then together) before bisecting: a repeat costs 2 runs
# (a repeated chain of two, 4), not ~log2(N) per fix credited.
RECENT_FIRST = 3


class KnownBugs:
    """The known-bug judgement of one campaign process: ``check`` runs a spec under a limit (the campaign's way,
    recorded as in flight), ``in_flight`` marks a spec as the one running; counts go to ``stats``."""

    def __init__(
        self,
        converter: str,
        budget: ItemBudget,
        stats: CampaignStats,
        check: Callable[..., Outcome],
        in_flight: Callable[[NetSpec, float | None], AbstractContextManager[None]],
    ) -> None:
        self.converter, self.budget, self.stats, self.check, self.in_flight = converter, budget, stats, check, in_flight
        self.recent: list[str] = []  # the entries credited last, most recent first (`RECENT_FIRST` of them)

    @cached_property
    def fixes(self) -> list[Fix]:
        """The known fixes this thunder takes (`fuzz.registry.novelty.fixes_on`); a stale one is a notice on stderr."""
        fixes, notices = fixes_on(installed_thunder())
        for notice in notices:
            print(f"ckpt-fuzz: {notice}", file=sys.stderr)
        return fixes

    @cached_property
    def fixed_entries(self) -> frozenset[str]:
        return frozenset(fix.entry for fix in self.fixes)

    def skipped(self, known: Sequence[KnownIssue]) -> bool:
        """Whether a spec matching ``known`` issues is not run, counted as discarded: only where an issue's cost is the
        problem (`KnownIssue.slow`: thunder takes minutes to fail). A spec a divergence or accuracy entry matches is
        always run and judged: a new bug beside the known one must show."""
        slow = [issue.id for issue in known if issue.slow]
        self.stats.discarded += bool(slow)
        self.stats.discarded_reasons.update(slow[:1])
        return bool(slow)

    def judge(self, outcome: Outcome, known: Sequence[KnownIssue]) -> bool:
        """Whether ``outcome`` (its spec matching ``known`` issues' triggers) is a known bug, counted per entry. A known
        failure is credited to the fixes that explain it; an entry without a fix explains it by appearance. A check
        the end of the budget cuts short raises `VerdictCut`."""
        credited = self.credited(outcome, known)
        self.stats.known_by_fix.update([" + ".join(credited)] if credited else [])
        if len(credited) == 1 and credited != (NOT_NARROWED,):  # (a chain's entries are not each reproduced)
            self.stats.known_issues[credited[0]][0] += 1
        if credited or not known or not outcome.valid:
            return bool(credited)
        if outcome.failure is not None:  # a fixed entry's form it is not: it fails with that fix applied
            fixed = [issue for issue in known if issue.id in self.fixed_entries]
            self.stats.known_resembling_failures += note_resemblance(outcome.failure, outcome.spec, fixed, FIXED_NOT)
        by_appearance = [issue for issue in known if issue.id not in self.fixed_entries]
        matching = [issue for issue in by_appearance if issue.reproduced_by(outcome.failure, outcome.spec)]
        expected = bool(matching) and self.explained(outcome.spec, matching, others=by_appearance)
        if outcome.failure is not None and not expected:
            self.stats.known_resembling_failures += note_resemblance(outcome.failure, outcome.spec, by_appearance)
        self.stats.known_class_failures += bool(matching)
        self.stats.known_explained_failures += expected
        for issue in known:
            self.stats.known_issues[issue.id][0 if expected else 1] += 1
        return expected

    def credited(self, outcome: Outcome, known: Sequence[KnownIssue]) -> tuple[str, ...]:
        """The entries whose fixes explain ``outcome``'s failure (`fuzz.registry.novelty.credited_fixes`: it passes
        with them applied); () for a pass or a failure they do not explain. Where two fixes each explain it alone,
        the one tried first wins: the trigger-matching entries', then those this process credited last (a chain's
        entries among them). While the item shrinks a failure, only those are tried (whether the step is a known bug
        is all shrinking needs): a step every fix explains and they do not is credited `NOT_NARROWED`."""
        if not outcome.valid or outcome.failure is None or not self.fixes:
            return ()
        started, limit = time.monotonic(), self.budget.shrinking_timeout_s()
        judge = lambda spec: self._judged(spec, limit)  # noqa: E731
        first = [*(issue.id for issue in known), *self.recent]
        try:
            if not self.budget.failures:
                credited = credited_fixes(outcome.spec, self.fixes, judge, first)
            elif passes_with(outcome.spec, self.fixes, judge):
                tried_first = [fix for fix in self.fixes if fix.entry in first]
                credited = credited_fixes(outcome.spec, tried_first, judge, first) or (NOT_NARROWED,)
            else:
                credited = ()
        finally:
            self.stats.fix_rejudge_s += time.monotonic() - started
        if credited and credited != (NOT_NARROWED,):  # most failures are forms of a few bugs: try these first next time
            self.recent = [*credited, *(entry for entry in self.recent if entry not in credited)][:RECENT_FIRST]
        return credited

    def fixes_explain(self, spec: NetSpec, limit_s: float | None) -> bool:
        """Whether ``spec`` passes on thunder with every known fix applied (one verdict under ``limit_s``): what it
        fails of is a known bug's form. A check the end of the budget cuts short raises `VerdictCut`."""
        return bool(self.fixes) and passes_with(spec, self.fixes, lambda candidate: self._judged(candidate, limit_s))

    def _judged(self, spec: NetSpec, limit_s: float | None) -> Outcome:
        """``spec``'s verdict under ``limit_s``; `VerdictCut` where the end of the budget, not a fix, stopped it (no
        verdict, as `fuzz.registry.issue.explained_by` takes it)."""
        judged = self.check(spec, limit_s, rerun=False, verdict_only=True)
        if judged.cut_short:
            raise VerdictCut
        return judged

    def explained(
        self,
        spec: NetSpec,
        issues: Sequence[KnownIssue],
        limit_s: float | None = None,
        others: Sequence[KnownIssue] = (),
    ) -> bool:
        """Whether known ``issues`` explain a failure of ``spec`` (`fuzz.registry.issue.explained_by`; ``others``: the
        spec's other known issues, which that failure may hide), each stripped network run under ``limit_s``
        (default: the item's limit for an example now, `ItemBudget.shrinking_timeout_s`), none past the end of the
        budget, and recorded as in flight."""
        limit = limit_s or self.budget.shrinking_timeout_s()
        in_flight = lambda stripped: self.in_flight(stripped, limit)  # noqa: E731
        end = self.budget.end
        return explained_by(spec, issues, self.converter, limit, in_flight=in_flight, others=others, deadline=end)


def note_resemblance(
    failure: ParityFailure, spec: NetSpec, known: Sequence[KnownIssue], difference: str | None = None
) -> bool:
    """Add to a new ``failure`` of ``spec`` which ``known`` issues of its class the spec matches, and how it differs
    from each (``difference``, or else its signature's: outside the band, other tensors, another crash: a new bug in a
    known bug's op shows as new, never hidden); returns whether there was any."""
    differences = [
        f"{RESEMBLES}{issue.id}, but is not it: {why}"
        for issue in known
        if failure.failure_class in issue.failure_classes
        and (why := difference or issue.difference(failure, spec)) is not None
    ]
    failure.resembles = tuple(dict.fromkeys([*failure.resembles, *differences]))  # (a remembered failure: once)
    return bool(differences)
