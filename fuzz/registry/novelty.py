"""Whether a failure is a known bug, judged by cause: run again on thunder with the known fixes applied
(`fuzz.registry.fixes`). A failure that passes there is known, credited to the entry whose fix alone makes it pass
(or to the fixes together: a chain); one that still fails is not any fixed entry's (docs/known-issues.md, "Fixes")."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from fuzz.generate.spec import NetSpec
from fuzz.judge.outcome import Outcome
from fuzz.registry.fixes import Fix, StaleFixError, applied, diff_with_bases, fixes_for, load_fix
from fuzz.registry.known_issues import KNOWN_ISSUES


def fixes_on(thunder: str) -> tuple[list[Fix], list[str]]:
    """The fixes of the entries expected on thunder version ``thunder`` (their version records say they still
    reproduce there) that fit its source; and a one-line notice for each that no longer fits."""
    fixes, notices = [], []
    for issue in KNOWN_ISSUES:
        if issue.expected_on(thunder) and (fix := load_fix(issue.id)) is not None:
            try:
                diff_with_bases(fix)  # every edit's span (its bases' too), found once in the installed file
            except StaleFixError as error:
                notices.append(f"fix of {issue.id} not applied (stale on thunder {thunder}): {error}")
            else:
                fixes.append(fix)
    return fixes, notices


def passes_with(spec: NetSpec, fixes: Sequence[Fix], judge: Callable[[NetSpec], Outcome]) -> bool:
    """Whether ``judge`` passes ``spec`` (a valid verdict, no failure) with ``fixes`` applied."""
    with applied(fixes):
        outcome = judge(spec)
    return outcome.valid and outcome.failure is None


def credited_fixes(
    spec: NetSpec, fixes: Sequence[Fix], judge: Callable[[NetSpec], Outcome], first: Sequence[str] = ()
) -> tuple[str, ...]:
    """The entries whose fixes explain a failure of ``spec``: () when ``judge`` still fails it (or gives no verdict)
    with every fix applied; else the fix of an entry in ``first`` (tried alone, in that order: the entries whose
    triggers match, then those a campaign credited last) that alone makes it pass, or the fixes of ``first`` together
    made minimal (a chain credited last), or the fewest of all the fixes found to make it pass (`_fewest`: about
    log2 of their count in thunderfx runs per fix credited; more than one: a chain). No set of fixes is run twice. A
    fix that builds on others brings them: where they alone make it pass, the credit is theirs."""
    verdicts: dict[frozenset[str], bool] = {}

    def passes(some: Sequence[Fix]) -> bool:
        key = frozenset(fix.entry for fix in some)
        if key not in verdicts:
            verdicts[key] = passes_with(spec, some, judge)
        return verdicts[key]

    if not fixes or not passes(fixes):
        return ()
    tried_first = [fix for entry in dict.fromkeys(first) for fix in fixes if fix.entry == entry]
    if len(fixes) > 1 and (alone := next((fix for fix in tried_first if passes([fix])), None)) is not None:
        fixes = [alone]
    elif 1 < len(tried_first) < len(fixes) and passes(tried_first):
        fixes = tried_first
    fixes = _fewest(fixes, passes)
    if len(fixes) == 1 and fixes[0].builds_on:  # a fix applies the fixes it builds on: they may be the cause
        if by_bases := credited_fixes(spec, fixes_for(fixes[0].builds_on), judge):
            return by_bases
    return tuple(fix.entry for fix in fixes)


def _fewest(fixes: Sequence[Fix], passes: Callable[[Sequence[Fix]], bool]) -> list[Fix]:
    """Of ``fixes``, which make a failure pass together (and none: it failed), a subset that passes and needs each of
    its fixes (more fixes never making it fail): the last fix of the shortest passing prefix, found by bisection, is
    needed; the search goes on among the fixes before it, those found kept applied, until they pass alone."""
    needed: list[Fix] = []
    candidates = list(fixes)
    while candidates:
        low, high = 1, len(candidates)  # needed + candidates[:high] passes; needed + candidates[:0] does not
        while low < high:
            middle = (low + high) // 2
            if passes([*needed, *candidates[:middle]]):
                high = middle
            else:
                low = middle + 1
        needed.append(candidates[high - 1])
        candidates = candidates[: high - 1]
        if candidates and passes(needed):
            break
    return [fix for fix in fixes if fix in needed]
