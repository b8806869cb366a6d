"""The files of the known-issue registry: ``known_issues/<id>/{spec.json,failure.txt,triage.txt}``, and its repro.py,
generated on demand from them (`write_repro`; not committed).

``python -m fuzz.registry.files`` writes every entry's repro.py; with ``--rerun`` it first re-runs each entry that is
not slow and records its failure and triage anew.
"""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

import fuzz.judge.failures
from fuzz.generate.reduce import valid
from fuzz.generate.spec import DTYPES, NetSpec
from fuzz.judge.failures import ParityFailure, Triage, with_triage
from fuzz.judge.limits import DEFAULT_TIMEOUT_S
from fuzz.judge.verdict import check_spec
from fuzz.registry.issue import KNOWN_ISSUES_DIR, KnownIssue, explained_by, installed_thunder
from fuzz.registry.known_issues import KNOWN_ISSUES
from fuzz.registry.signatures import (
    ENTRY_FILE,
    MIN_REPRODUCTIONS,
    entry_text,
    observe,
    read_entry,
    record_signatures,
    with_other_devices,
)
from fuzz.report.failures import spec_digest, write_failure
from fuzz.report.repro import repro_source
from fuzz.report.run_folder import write_atomically

_TRIAGES = {cls.label: cls for cls in Triage.__subclasses__()}


def recorded_failure(issue_id: str) -> ParityFailure:
    """The failure recorded in the entry's failure.txt (``ClassName: message``), with triage.txt's label."""
    directory = KNOWN_ISSUES_DIR / issue_id
    name, _, message = (directory / "failure.txt").read_text().partition(": ")
    label, _, reason = (directory / "triage.txt").read_text().partition(": ")
    return with_triage(getattr(fuzz.judge.failures, name)(message.rstrip("\n")), _TRIAGES[label](reason.rstrip("\n")))


def recorded_spec(issue_id: str) -> NetSpec:
    return NetSpec.from_json((KNOWN_ISSUES_DIR / issue_id / "spec.json").read_text())


def expected_repro(issue_id: str) -> str:
    """The repro.py the current builder and repro writer write for the entry."""
    return repro_source(recorded_spec(issue_id), recorded_failure(issue_id), "fixed")


def write_repro(issue_id: str) -> Path:
    """Write the entry's repro.py (`expected_repro`) into its folder; returns its path."""
    path = KNOWN_ISSUES_DIR / issue_id / "repro.py"
    write_atomically(path, expected_repro(issue_id))
    return path


# Seeds tried per dtype for the reproductions a signature is recorded from (the entry's own spec, other weights).
_RECORD_TRIES = 24
REPRODUCTIONS = "reproductions"  # in an entry's folder: shrunk campaign failures admitted as the entry's bug


def add_reproduction(issue: KnownIssue, failure_folder: Path, converter: str = "fixed") -> Path:
    """Admit the shrunk failure in ``failure_folder`` (its spec.json) as a reproduction of ``issue`` (`record_entry`),
    only when the entry's predicate matches it, it fails in one of the entry's classes, and it passes once the entry's
    trigger is taken out (`explained_by`: the bug is the entry's, not a second one beside it). Returns the stored
    spec; raises ValueError saying which test it failed."""
    spec = NetSpec.from_json((failure_folder / "spec.json").read_text())
    if not issue.applies(spec):
        raise ValueError(f"{failure_folder}: {issue.id}'s predicate does not match its network")
    failure = check_spec(spec, converter=converter).failure
    if failure is None or failure.failure_class not in issue.failure_classes:
        raise ValueError(f"{failure_folder}: does not fail in a class of {issue.id} ({failure or 'thunderfx matches'})")
    if not explained_by(spec, [issue], converter, DEFAULT_TIMEOUT_S):
        raise ValueError(f"{failure_folder}: still fails without {issue.id}'s trigger: another bug, not this entry's")
    path = KNOWN_ISSUES_DIR / issue.id / REPRODUCTIONS / f"{spec_digest(spec)}.json"
    path.parent.mkdir(exist_ok=True)
    write_atomically(path, spec.to_json() + "\n")
    return path


def record_entry(issue: KnownIssue, device: str = "cpu", converter: str = "fixed") -> tuple[Path, str]:
    """Record ``issue``'s ``entry.toml`` (`fuzz.registry.signatures`) from reproductions of its registered spec (in
    its dtype and every other dtype the entry applies to, on up to `_RECORD_TRIES` seeds each, until
    `MIN_REPRODUCTIONS` reproduced: a failure of the entry's classes that its trigger explains) and from each admitted
    reproduction (`add_reproduction`); the bands other devices recorded are kept. Returns the file and what it was
    recorded from; raises ValueError when nothing reproduced
    (nothing is written then)."""
    base = replace(recorded_spec(issue.id), device=device)
    dtypes = [base.dtype] + [d for d in DTYPES if d != base.dtype and issue.applies(replace(base, dtype=d))]
    observations, counts = [], {}
    for dtype in dtypes:
        found = 0
        for seed in range(base.seed, base.seed + _RECORD_TRIES):
            spec = replace(base, dtype=dtype, seed=seed)
            if not valid(spec):
                break
            found += _observe_reproduction(issue, spec, converter, observations)
            if found == MIN_REPRODUCTIONS:
                break
        if found:
            counts[dtype] = found
    admitted = 0
    for path in sorted((KNOWN_ISSUES_DIR / issue.id / REPRODUCTIONS).glob("*.json")):
        spec = replace(NetSpec.from_json(path.read_text()), device=device)
        admitted += _observe_reproduction(issue, spec, converter, observations)
    if not observations:
        raise ValueError(f"{issue.id}: its registered spec reproduces on no seed; bisect or retire the entry")
    how = ", ".join(f"{n} reproduction(s) in {dtype}" for dtype, n in counts.items())
    how = f"recorded on {device}, thunder {installed_thunder()}, from {how} (seeds of its registered spec)" + (
        f" and {admitted} admitted campaign reproduction(s) ({REPRODUCTIONS}/)" if admitted else ""
    )
    path = KNOWN_ISSUES_DIR / issue.id / ENTRY_FILE
    previous = (read_entry(path.parent) or {}).get("signature", [])
    signatures = with_other_devices(record_signatures(observations, installed_thunder()), previous, device)
    write_atomically(path, entry_text(path.read_text(), issue.id, signatures, how))
    return path, how


def _observe_reproduction(issue: KnownIssue, spec: NetSpec, converter: str, observations: list) -> bool:
    """Run ``spec``; when it fails in one of ``issue``'s classes and passes once the entry's trigger is taken out
    (`explained_by`: another seed's weights can show a second bug), append its `observe` to ``observations`` (True)."""
    failure = check_spec(spec, converter=converter).failure
    if failure is None or failure.failure_class not in issue.failure_classes:
        return False
    if not explained_by(spec, [issue], converter, DEFAULT_TIMEOUT_S):
        return False
    observations.append(observe(spec, failure))
    return True


def record_entries(ids: list[str], device: str, added: list[Path]) -> int:
    """``ckpt-fuzz known-issues --record``: admit the ``added`` failure folders as reproductions of the one entry
    ``ids`` names (`add_reproduction`), then record each entry named (all but the slow ones when none is) with
    `record_entry`; prints what it did. Exit status 0, or 1 when a folder was not admitted or an entry not recorded."""
    by_id = {issue.id: issue for issue in KNOWN_ISSUES}
    for folder in added:
        try:
            print(f"admitted {folder} as a reproduction: {add_reproduction(by_id[ids[0]], folder)}", flush=True)
        except ValueError as error:
            print(f"NOT ADMITTED: {error}", flush=True)
            return 1
    failed = 0
    for issue in [by_id[i] for i in ids] or [issue for issue in KNOWN_ISSUES if not issue.slow]:
        try:
            path, how = record_entry(issue, device)
        except ValueError as error:
            print(f"NOT RECORDED: {error}", flush=True)
            failed += 1
            continue
        print(f"{issue.id}: {how} -> {path}", flush=True)
    return 1 if failed else 0


def main(argv: list[str]) -> int:
    for issue in KNOWN_ISSUES:
        directory = KNOWN_ISSUES_DIR / issue.id
        if "--rerun" in argv and not issue.slow:
            failure = check_spec(recorded_spec(issue.id)).failure
            if failure is None:
                print(f"{issue.id}: no longer reproduces; record where with `ckpt-fuzz bisect {issue.id} --record`")
                continue
            # spec.json first in today's form (older entries lack newer null fields): the files are rewritten in place
            write_atomically(directory / "spec.json", recorded_spec(issue.id).to_json() + "\n")
            write_failure(directory.parent, recorded_spec(issue.id), failure, "fixed", directory.name, listed=False)
        print(f"{issue.id}: {recorded_failure(issue.id).signature}, wrote {write_repro(issue.id)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
