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
    triggers match, then those a campaign credited last) that alone makes it pass, or the smallest half (by
    bisection: about 2 log2 of the fixes' count in thunderfx runs) down to one fix, or, where only fixes from both
    halves together do, a chain: that set less each fix it passes without (one more run per fix in it). A fix that
    builds on others brings them: where they alone make it pass, the credit is theirs."""

    def passes(some: Sequence[Fix]) -> bool:
        return passes_with(spec, some, judge)

    if not fixes or not passes(fixes):
        return ()
    tried_first = [fix for entry in dict.fromkeys(first) for fix in fixes if fix.entry == entry]
    if len(fixes) > 1 and (alone := next((fix for fix in tried_first if passes([fix])), None)) is not None:
        fixes = [alone]
    while len(fixes) > 1:
        middle = len(fixes) // 2
        half = next((half for half in (fixes[:middle], fixes[middle:]) if passes(half)), None)
        if half is None:  # a chain: fixes from both halves are needed together
            break
        fixes = half
    for fix in list(fixes) if len(fixes) > 1 else []:  # a chain, made minimal: each fix it can do without goes
        if passes(rest := [other for other in fixes if other is not fix]):
            fixes = rest
    if len(fixes) == 1 and fixes[0].builds_on:  # a fix applies the fixes it builds on: they may be the cause
        if by_bases := credited_fixes(spec, fixes_for(fixes[0].builds_on), judge):
            return by_bases
    return tuple(fix.entry for fix in fixes)
