"""The three checks a known issue's fix must pass, recorded in its ``fix.json`` (docs/known-issues.md, "Fixes"):

1. the entry's upstream.py exits 0 with the fix and 1 without it; its registered spec and every recorded
   reproduction fail without it; with it the registered spec passes and every reproduction either passes or fails
   otherwise (not as the entry: a second bug the first hid, listed in ``another_bug_fixed``);
2. it changes no verdict of examples that pass on unmodified thunder: drawn general networks and programs, judged
   with the named fixes applied together (`PassingCheck`), recorded under ``passing_examples`` in each one's fix.json;
3. thunder's own tests for what it touches (the fix's ``THUNDER_TESTS``) end no worse with it than without it: the same
   counts, or expected failures now passing, or tests the fix adds (thunder's vjp test of an op it gives a rule) that
   pass; recorded per selection under ``same`` (no worse).

``python -m fuzz.registry.fix_checks ID [ID ...]`` runs checks 1 and 3 and writes fix.json;
``python -m fuzz.registry.fix_checks --passing N [--seed S] ID [ID ...]`` runs check 2 (only) until N drawn examples
passed.
"""

from __future__ import annotations

import argparse
import datetime
import json
import re
import shlex
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import thunder
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import seed as with_seed
from hypothesis import strategies as st

from fuzz.generate.program_specs import program_specs
from fuzz.generate.spec import NetSpec
from fuzz.judge.verdict import check_spec
from fuzz.registry.files import REPRODUCTIONS, recorded_spec
from fuzz.registry.fixes import Fix, applied, fixes_for
from fuzz.registry.issue import KNOWN_ISSUES_DIR, installed_thunder
from fuzz.registry.known_issues import KNOWN_ISSUES
from fuzz.report.failures import spec_digest
from fuzz.report.run_folder import write_atomically
from fuzz.strategies import net_specs

FIX_RECORD = "fix.json"
PASSING_KEY = "passing_examples"  # check 2's part of fix.json, kept when checks 1 and 3 run again
_THUNDER_ROOT = Path(thunder.__file__).resolve().parents[1]  # site-packages: where "thunder/tests/..." resolves
_SUMMARY = re.compile(r"^=* ?(\d+ \w+(?:, \d+ \w+)*) in [\d.]+s", re.MULTILINE)
_NO_SUMMARY = "no summary"  # a pytest run that printed no summary line (it crashed or timed out)
_OUTCOMES = ("passed", "failed", "errors", "error", "skipped", "xfailed", "xpassed")  # not warnings: they vary


def _counts(summary: str) -> dict[str, int]:
    """pytest's summary line ("3 passed, 1 skipped, 2 warnings") as outcome counts, warnings dropped."""
    parts = (part.split() for part in summary.split(", ") if part)  # "": a run that selected no test
    return {word: int(n) for n, word in parts if word in _OUTCOMES}


def _outcomes(summary: str) -> str:
    return ", ".join(f"{n} {word}" for word, n in _counts(summary).items())


def _run(args: list[str], timeout_s: float) -> subprocess.CompletedProcess:
    return subprocess.run(args, capture_output=True, text=True, timeout=timeout_s, cwd=KNOWN_ISSUES_DIR.parent)


def _under(entries: Sequence[str], mode: str, args: list[str]) -> list[str]:
    if not entries:
        return [sys.executable, *(["-m", "pytest"] if mode == "pytest" else []), *args]
    return [sys.executable, "-m", "fuzz.registry.fixes", mode, ",".join(entries), *args]


def _ways(fix: Fix) -> dict[str, tuple[str, ...]]:
    """The thunders check 1 compares, each as the fixes applied: stock, with the fix (its bases come along), and,
    for a fix that builds on others, with those alone (the fix must be needed beyond them)."""
    return {"stock": (), **({"bases_only": fix.builds_on} if fix.builds_on else {}), "fixed": (fix.entry,)}


def upstream_exits(fix: Fix) -> dict[str, int]:
    """upstream.py's exit status on each of `_ways` (a fresh interpreter each)."""
    script = str(KNOWN_ISSUES_DIR / fix.entry / "upstream.py")
    return {name: _run(_under(entries, "script", [script]), 600).returncode for name, entries in _ways(fix).items()}


def reproductions(entry: str) -> list[NetSpec]:
    """The entry's registered spec and its admitted reproductions."""
    folder = KNOWN_ISSUES_DIR / entry / REPRODUCTIONS
    return [recorded_spec(entry), *(NetSpec.from_json(p.read_text()) for p in sorted(folder.glob("*.json")))]


def reproduction_verdicts(fix: Fix) -> dict[str, object]:
    """How many of the entry's reproductions fail on the stock thunder, how many pass with the fix, and, for those
    that still fail with it, the failure then (another bug the crash or divergence hid: the entry's own must be gone,
    and its registered spec must pass)."""
    issue = next(issue for issue in KNOWN_ISSUES if issue.id == fix.entry)
    specs = reproductions(fix.entry)
    stock = [check_spec(spec) for spec in specs]
    bases_only = {}
    if fix.builds_on:
        with applied(fixes_for(fix.builds_on)):
            bases_only["fail_bases_only"] = sum(o.valid and o.failure is not None for o in map(check_spec, specs))
    with applied([fix]):
        fixed = [check_spec(spec) for spec in specs]
    others = {
        spec_digest(o.spec): f"{o.failure.failure_class}: {str(o.failure).splitlines()[0][:160]}"
        for o in fixed
        if o.failure is not None and not issue.reproduced_by(o.failure, o.spec)
    }
    return {
        "reproductions": len(specs),
        "fail_stock": sum(o.valid and o.failure is not None for o in stock),
        **bases_only,
        "pass_fixed": sum(o.valid and o.failure is None for o in fixed),
        "another_bug_fixed": others,
        "registered_passes_fixed": fixed[0].valid and fixed[0].failure is None,
    }


def _no_worse(stock: str, fixed: str) -> bool:
    """The same outcome counts, but for expected failures (xfail) that now pass (xpassed: thunder's own test of the
    bug the fix removes, as its sdpa test samples a fully masked row) and tests the fix adds that pass (thunder
    generates a vjp test for each op with a gradient rule: floor and ceil get theirs), nothing else changed."""
    if stock.startswith(_NO_SUMMARY) or fixed.startswith(_NO_SUMMARY):
        return False
    before, after = _counts(stock), _counts(fixed)
    newly_xpassed = after.get("xpassed", 0) - before.get("xpassed", 0)
    if newly_xpassed < 0 or before.get("xfailed", 0) - after.get("xfailed", 0) != newly_xpassed:
        return False
    others = ("passed", "xfailed", "xpassed")
    return after.get("passed", 0) >= before.get("passed", 0) and all(
        before.get(word, 0) == after.get(word, 0) for word in _OUTCOMES if word not in others
    )


def thunder_tests(fix: Fix) -> dict[str, object]:
    """Each of the fix's selections of thunder's tests, its pytest summary without and with the fix."""
    results = {}
    for selection in fix.thunder_tests:
        path, *rest = shlex.split(selection)
        args = [str(_THUNDER_ROOT / path), *rest, "-q", "-p", "no:cacheprovider", "-p", "no:randomly"]
        ends = {}
        for name in ("stock", "fixed"):
            ran = _run(_under(_ways(fix)[name], "pytest", args), 3000)
            found = _SUMMARY.findall(ran.stdout)
            ends[name] = _outcomes(found[-1]) if found else f"{_NO_SUMMARY} (exit {ran.returncode})"
        results[selection] = {**ends, "same": _selection_passes(ends["stock"], ends["fixed"])}
    return results


def _selection_passes(stock: str, fixed: str) -> bool:
    """A selection of thunder's tests ran at least one test, stock or fixed (one that runs none proves nothing; one
    whose tests the fix adds proves the fix's own rule: thunder generates an op's vjp test once it has one), and
    ended no worse with the fix."""
    ran = any(re.search(r"\d+ (passed|failed|xfailed|xpassed)", end) for end in (stock, fixed))
    return ran and _no_worse(stock, fixed)


def check(entry: str) -> dict:
    """Checks 1 and 3 of ``entry``'s fix, written to its fix.json; returns the record."""
    (fix,) = fixes_for([entry])
    record = {
        "thunder": installed_thunder(),
        "checked_on": datetime.date.today().isoformat(),
        "diff_lines": fix.changed_lines(),
        "upstream_py": upstream_exits(fix),
        **reproduction_verdicts(fix),
        "thunder_tests": thunder_tests(fix),
    }
    path = KNOWN_ISSUES_DIR / entry / FIX_RECORD
    if path.exists() and PASSING_KEY in (previous := json.loads(path.read_text())):
        record[PASSING_KEY] = previous[PASSING_KEY]
    record["passes"] = (
        record["upstream_py"] == {**dict.fromkeys(_ways(fix), 1), "fixed": 0}
        and record["registered_passes_fixed"]
        and record["fail_stock"] == record["pass_fixed"] + len(record["another_bug_fixed"]) == record["reproductions"]
        and record.get("fail_bases_only", record["reproductions"]) == record["reproductions"]
        and all(result["same"] for result in record["thunder_tests"].values())
    )
    write_atomically(path, json.dumps(record, indent=2) + "\n")
    return record


def _verdict(outcome) -> str:
    if not outcome.valid:
        return f"invalid: {outcome.invalid_reason}"
    return "pass" if outcome.failure is None else f"{outcome.failure.failure_class}: {str(outcome.failure)[:160]}"


@dataclass
class PassingCheck:
    """Check 2: each visited example that is valid and passes on the installed thunder, judged again with ``fixes``
    applied; ``changed``: those whose verdict the fixes change (by spec digest: the spec and its verdict then)."""

    fixes: Sequence[Fix]
    wanted: int
    drawn: int = 0
    passing: int = 0
    changed: dict[str, dict] = field(default_factory=dict)

    def visit(self, spec: NetSpec) -> bool:
        """Judge ``spec`` (twice where it passes); whether ``wanted`` passing examples have now been judged."""
        self.drawn += 1
        if _verdict(check_spec(spec)) == "pass":
            self.passing += 1
            with applied(self.fixes):
                fixed = _verdict(check_spec(spec))
            if fixed != "pass":
                self.changed[spec_digest(spec)] = {"verdict_with_fixes": fixed, "spec": spec.to_dict()}
            if self.passing % 50 == 0:  # a long check shows it is moving
                print(f"check 2: {self.passing} passing of {self.drawn} drawn, {len(self.changed)} changed", flush=True)
        return self.passing >= self.wanted


def passing_check(entries: Sequence[str], wanted: int, seed: int) -> dict:
    """Check 2 for the fixes of ``entries`` applied together, over general networks and programs drawn from ``seed``
    on CPU, until ``wanted`` of them passed on the installed thunder; written into each entry's fix.json."""
    check, start = PassingCheck(fixes_for(entries), wanted), time.monotonic()
    done = False

    def visit(spec: NetSpec) -> None:
        nonlocal done
        done = done or check.visit(spec)

    drawn = st.one_of(net_specs(device="cpu"), program_specs(device="cpu"))
    run = settings(
        max_examples=wanted * 10, database=None, deadline=None, phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )(given(drawn)(visit))  # fmt: skip
    with_seed(seed)(run)()
    result = {
        "thunder": installed_thunder(),
        "checked_on": datetime.date.today().isoformat(),
        "with": sorted(entries),
        "diff_lines": sum(fix.changed_lines() for fix in check.fixes),
        # Each fix's own lines: a fix whose diff changes since is held to check 2 again (tests/unit/test_fixes.py).
        "diff_lines_by_fix": {fix.entry: fix.changed_lines() for fix in check.fixes},
        "seed": seed,
        "drawn": check.drawn,
        "passing": check.passing,
        "changed": check.changed,
        "seconds": round(time.monotonic() - start),
    }
    for entry in entries:
        path = KNOWN_ISSUES_DIR / entry / FIX_RECORD
        record = json.loads(path.read_text()) if path.exists() else {}
        write_atomically(path, json.dumps({**record, PASSING_KEY: result}, indent=2) + "\n")
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="The checks of known issues' fixes, into their fix.json")
    parser.add_argument("entries", nargs="+", help="the entries whose fixes to check")
    parser.add_argument("--passing", type=int, help="check 2 only: until N drawn examples passed on stock thunder")
    parser.add_argument("--seed", type=int, default=0, help="check 2's generation seed (%(default)s)")
    args = parser.parse_args(argv)
    if args.passing is not None:
        result = passing_check(args.entries, args.passing, args.seed)
        print(f"check 2: {result['passing']} passing of {result['drawn']} drawn; {len(result['changed'])} changed")
        return 1 if result["changed"] else 0
    for entry in args.entries:
        print(entry, json.dumps(check(entry)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
