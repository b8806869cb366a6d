"""The files of the known-issue registry: ``known_issues/<id>/{spec.json,repro.py,failure.txt}``.

``python -m fuzz.known_issue_files`` rewrites every entry's repro.py from its spec.json and
failure.txt, after a change to the builder or the repro template (tests fail on stale repros).
"""

from __future__ import annotations

from pathlib import Path

import fuzz.oracle
from fuzz.oracle import ParityFailure
from fuzz.report import repro_source
from fuzz.spec import NetSpec

KNOWN_ISSUES_DIR = Path(__file__).resolve().parent.parent / "known_issues"


def recorded_failure(issue_id: str) -> ParityFailure:
    """The failure recorded in the entry's failure.txt (``ClassName: message``)."""
    name, _, message = (KNOWN_ISSUES_DIR / issue_id / "failure.txt").read_text().partition(": ")
    return getattr(fuzz.oracle, name)(message.rstrip("\n"))


def recorded_spec(issue_id: str) -> NetSpec:
    return NetSpec.from_json((KNOWN_ISSUES_DIR / issue_id / "spec.json").read_text())


def expected_repro(issue_id: str) -> str:
    """The repro.py the current builder and template write for the entry."""
    return repro_source(recorded_spec(issue_id), recorded_failure(issue_id), "fixed")


if __name__ == "__main__":
    for directory in sorted(KNOWN_ISSUES_DIR.iterdir()):
        (directory / "repro.py").write_text(expected_repro(directory.name))
        print(f"rewrote {directory / 'repro.py'}")
