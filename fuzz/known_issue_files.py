"""The files of the known-issue registry: ``known_issues/<id>/{spec.json,repro.py,failure.txt,triage.txt}``.

``python -m fuzz.known_issue_files`` rewrites every entry's repro.py from its other files, after a
change to the builder or the repro template (tests fail on stale repros); with ``--rerun`` it
first re-runs each entry that is not slow and records its failure and triage anew.
"""

from __future__ import annotations

import sys

import fuzz.oracle
from fuzz.harness import check_spec
from fuzz.known_issues import KNOWN_ISSUES, KNOWN_ISSUES_DIR
from fuzz.oracle import ParityFailure, Triage, with_triage
from fuzz.report import repro_source, write_failure
from fuzz.spec import NetSpec

_TRIAGES = {cls.label: cls for cls in Triage.__subclasses__()}


def recorded_failure(issue_id: str) -> ParityFailure:
    """The failure recorded in the entry's failure.txt (``ClassName: message``), with triage.txt's label."""
    directory = KNOWN_ISSUES_DIR / issue_id
    name, _, message = (directory / "failure.txt").read_text().partition(": ")
    label, _, reason = (directory / "triage.txt").read_text().partition(": ")
    return with_triage(getattr(fuzz.oracle, name)(message.rstrip("\n")), _TRIAGES[label](reason.rstrip("\n")))


def recorded_spec(issue_id: str) -> NetSpec:
    return NetSpec.from_json((KNOWN_ISSUES_DIR / issue_id / "spec.json").read_text())


def expected_repro(issue_id: str) -> str:
    """The repro.py the current builder and template write for the entry."""
    return repro_source(recorded_spec(issue_id), recorded_failure(issue_id), "fixed")


def main(argv: list[str]) -> int:
    for issue in KNOWN_ISSUES:
        directory = KNOWN_ISSUES_DIR / issue.id
        if "--rerun" in argv and not issue.slow:
            failure = check_spec(recorded_spec(issue.id)).failure
            if failure is None:
                print(f"{issue.id}: no longer reproduces; record where with `ckpt-fuzz bisect {issue.id} --record`")
                continue
            write_failure(directory.parent, recorded_spec(issue.id), failure, "fixed", directory.name)
        (directory / "repro.py").write_text(expected_repro(issue.id))
        print(f"{issue.id}: {recorded_failure(issue.id).signature}, rewrote {directory / 'repro.py'}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
