"""Each registry entry's upstream.py and issue.md (`fuzz.report.upstream`, `fuzz.report.issue_draft`).

``python -m fuzz.registry.drafts [ID ...] [--versions V,V]`` writes them for the entries named (all when none is):
upstream.py is generated, except where the entry's ``[upstream]`` table says ``reduced_by_hand`` (the generated one
was over `MAX_LINES`: that file is kept as committed); it is run once per version (default: the installed thunder and
the newest nightly) in a fresh interpreter and its exit statuses are recorded in ``upstream.json``, which issue.md
quotes.
"""

from __future__ import annotations

import argparse
import json
import sys
from datetime import date

from fuzz.registry.files import KNOWN_ISSUES_DIR, recorded_failure, recorded_spec
from fuzz.registry.fixes import Fix, diff_with_bases, load_fix
from fuzz.registry.issue import VERSIONS_FILE, KnownIssue, installed_thunder
from fuzz.registry.known_issues import KNOWN_ISSUES
from fuzz.registry.signatures import read_entry
from fuzz.report.issue_draft import Draft, issue_markdown
from fuzz.report.run_folder import write_atomically
from fuzz.report.upstream import MAX_LINES, upstream_source

UPSTREAM, RECORD, ISSUE = "upstream.py", "upstream.json", "issue.md"


def title(issue: KnownIssue) -> str:
    return issue.id.replace("-", " ")


def write_drafts(issue: KnownIssue, versions: list[str], timeout_s: float) -> dict:
    """Write ``issue``'s upstream.py, run it on ``versions`` and record that (upstream.json), then its issue.md.
    Returns the record."""
    from fuzz.versions.bisect import run_repro

    directory = KNOWN_ISSUES_DIR / issue.id
    if reduced_by_hand(issue):
        if not (directory / UPSTREAM).exists():
            raise SystemExit(f"{directory / UPSTREAM}: missing: write it, or drop reduced_by_hand from [upstream]")
        source = (directory / UPSTREAM).read_text()
    else:
        source = upstream_source(recorded_spec(issue.id), recorded_failure(issue.id), title(issue), installed_thunder())
        write_atomically(directory / UPSTREAM, source)
    trials = [run_repro(directory / UPSTREAM, version, timeout_s) for version in versions]
    record = {
        "lines": len(source.splitlines()),
        "exit": {t.version: {"reproduces": 1, "not reproduced": 0}.get(t.result, 2) for t in trials},
        "output": {t.version: t.detail for t in trials},
        "checked_on": date.today().isoformat(),
    }
    write_atomically(directory / RECORD, json.dumps(record, indent=2) + "\n")
    write_atomically(directory / ISSUE, issue_markdown(draft_of(issue, source, record["exit"])))
    return record


def reduced_by_hand(issue: KnownIssue) -> str | None:
    """How ``issue``'s upstream.py was reduced by hand from the generated one, or None where it is generated."""
    return upstream_table(issue).get("reduced_by_hand")


def upstream_table(issue: KnownIssue) -> dict:
    """The ``[upstream]`` table of ``issue``'s entry.toml (empty where it has none)."""
    return (read_entry(KNOWN_ISSUES_DIR / issue.id) or {}).get("upstream", {})


def draft_of(issue: KnownIssue, source: str, exits: dict[str, int]) -> Draft:
    """The issue draft of a registry entry, from its files."""
    upstream = upstream_table(issue)
    versions_path = KNOWN_ISSUES_DIR / issue.id / VERSIONS_FILE
    versions = json.loads(versions_path.read_text()) if versions_path.exists() else {}
    return Draft(
        title(issue),
        issue.description,
        recorded_failure(issue.id),
        source,
        exits,
        versions.get("introduced_in"),
        versions.get("fixed_in"),
        upstream.get("matches", []),
        upstream.get("related", []),
        f"registry entry `known_issues/{issue.id}`",
        None if (fix := load_fix(issue.id)) is None else _candidate(fix),
    )


def _candidate(fix: Fix) -> tuple[str, str]:
    """The fix's why and diff; a fix that builds on others says so, and its diff holds theirs first."""
    why = fix.why
    if fix.builds_on:
        why += f" It builds on the fix of {', '.join(fix.builds_on)}: the diff below holds that fix first."
    return why, diff_with_bases(fix)


def main(argv: list[str]) -> int:
    from fuzz.versions.thunder_versions import available, resolve

    parser = argparse.ArgumentParser(prog="python -m fuzz.registry.drafts", description=__doc__)
    parser.add_argument("ids", nargs="*", help="registry entries (all when none is named)")
    parser.add_argument("--versions", default="installed,nightly", help="thunder versions to run upstream.py on")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per run")
    args = parser.parse_args(argv)
    known = available()
    versions = [installed_thunder() if v == "installed" else resolve(v, known) for v in args.versions.split(",")]
    by_id = {issue.id: issue for issue in KNOWN_ISSUES}
    unknown = [i for i in args.ids if i not in by_id]
    if unknown:
        parser.error(f"no registry entry {', '.join(unknown)}: see known_issues/")
    for issue in [by_id[i] for i in args.ids] or KNOWN_ISSUES:
        record = write_drafts(issue, versions, args.timeout)
        print(f"{issue.id}: {record['lines']} lines, exit {record['exit']}", flush=True)
        if record["lines"] > MAX_LINES:
            print(f"  over {MAX_LINES} lines: reduce it by hand, say how in entry.toml's [upstream] reduced_by_hand")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
