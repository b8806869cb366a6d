"""What a known-issue entry is (`KnownIssue`): its claim, its version record, whether a failure is it, and
whether a failure goes away without the entry's trigger (`explained_by`)."""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, replace
from functools import cache
from pathlib import Path
from typing import Any

from packaging.version import Version

from fuzz.generate import program
from fuzz.generate.reduce import valid
from fuzz.generate.spec import NetSpec, any_trainable
from fuzz.judge.failures import ParityFailure
from fuzz.registry.signatures import observe, read_entry, resemblance
from fuzz.registry.triggers import triggered, without_triggers
from fuzz.versions.thunder_versions import installed

KNOWN_ISSUES_DIR = Path(__file__).resolve().parents[2] / "known_issues"


VERSIONS_FILE = "versions.json"


@cache
def _version_record(path: Path) -> dict:
    return json.loads(path.read_text()) if path.exists() else {}


_entry = cache(read_entry)


installed_thunder = cache(installed)  # the thunder this process imports does not change while it runs


@dataclass(frozen=True)
class KnownIssue:
    """A failure thunder is known to show on every spec one of its ``triggers`` sets off (on versions before its
    fix); the claim ``known_issues/<id>/entry.toml`` makes (`fuzz.registry.known_issues`)."""

    id: str
    description: str
    failure_classes: tuple[str, ...]
    # Tables in the vocabulary of `fuzz.registry.triggers`; any one holding sets the issue off.
    triggers: tuple[Mapping[str, Any], ...]
    # Too slow to re-run on every matching example (thunder takes up to the time limit to fail):
    # skipped in every profile; its registered spec is what tells whether it still reproduces.
    slow: bool = False

    def applies(self, spec: NetSpec) -> bool:
        return any(triggered(spec, trigger) for trigger in self.triggers)

    def without_trigger(self, spec: NetSpec) -> NetSpec:
        """``spec`` with this issue's trigger taken out (the in-place layer replaced by its Linear, the offending
        op layer deleted, ...): a failure is this issue only if it then goes away."""
        return without_triggers(spec, list(self.triggers))

    def versions(self) -> dict:
        """The entry's version record (see `fuzz.versions.bisect.version_record`; empty before any bisection)."""
        return _version_record(KNOWN_ISSUES_DIR / self.id / VERSIONS_FILE)

    def expected_on(self, thunder: str) -> bool:
        """Whether the issue is expected on thunder version ``thunder``: from its recorded introduction (if any)
        to before its recorded fix (if any)."""
        record = self.versions()
        introduced_in, fixed_in = record.get("introduced_in"), record.get("fixed_in")
        return (introduced_in is None or Version(thunder) >= Version(introduced_in)) and (
            fixed_in is None or Version(thunder) < Version(fixed_in)
        )

    def reproduced_by(self, failure: ParityFailure | None, spec: NetSpec) -> bool:
        """Whether ``failure`` of ``spec`` is this issue showing (see `difference`)."""
        return self.difference(failure, spec) is None

    def difference(self, failure: ParityFailure | None, spec: NetSpec) -> str | None:
        """None when ``failure`` of ``spec`` is this issue showing: a failure of one of its classes that matches the
        signature recorded in its ``entry.toml`` inside the band (`fuzz.registry.signatures`; an entry without
        a signature, a slow entry never run in a campaign, matches by class); else how it differs."""
        if failure is None or failure.failure_class not in self.failure_classes:
            return f"another class ({failure.failure_class if failure else 'no failure'})"
        entry = _entry(KNOWN_ISSUES_DIR / self.id)
        return None if not (entry or {}).get("signature") else resemblance(entry, observe(spec, failure))

    def status(self, reproduced: bool, thunder: str) -> tuple[str, bool]:
        """The verdict of a re-test of the entry on thunder version ``thunder`` that ``reproduced`` it or not, and
        whether that is what the record expects."""
        if self.expected_on(thunder):
            return ("reproduces", True) if reproduced else ("no longer reproduces", False)
        record = self.versions()
        fixed = record.get("fixed_in") and Version(thunder) >= Version(record["fixed_in"])
        window = f"fixed in {record['fixed_in']}" if fixed else f"introduced in {record.get('introduced_in')}"
        return (
            (f"reproduces outside its recorded range ({window})", False)
            if reproduced
            else (f"not expected: {window}", True)
        )


def with_a_backward(stripped: NetSpec) -> NetSpec:
    """A network its known issues' triggers were taken out of, as `explained_by` runs it: where the triggers held its
    only parameters, its input differentiated instead; a program whose triggers were its outputs' only path to grad
    (an update giving an input grad) returning its input too, as the strategies make such a program. Else there is no
    backward to run, and the network would prove nothing either way."""
    if not stripped.input_requires_grad and stripped.vocab is None and not any_trainable(stripped.layers):
        stripped = replace(stripped, input_requires_grad=True)
    return program.with_a_graph(stripped) if stripped.is_program else stripped


def explained_by(
    spec: NetSpec,
    issues: Sequence[KnownIssue],
    converter: str,
    timeout_s: float | None,
    in_flight: Callable[[NetSpec], AbstractContextManager] = lambda spec: nullcontext(),
    others: Sequence[KnownIssue] = (),
    deadline: float = math.inf,
) -> bool:
    """Whether known ``issues`` explain a failure of ``spec`` in their classes: it goes away without their triggers.

    A network that is nothing but the triggers is explained by them; one whose triggers held its only parameters
    differentiates its input once they are out (else nothing is left to differentiate); one that taking them out
    leaves invalid, or whose stripped run is invalid, is not (reported as a new failure rather than hidden).
    ``others``: known issues whose own failure the first one's may hide (a crash before a wrong gradient): where the
    stripped network fails as some of them whose triggers it holds, they must explain that failure in turn, down to a
    network that passes. ``in_flight``: what to run a stripped network within (a campaign records it, should its
    process die). ``deadline`` (`time.monotonic`): a stripped run it cuts short raises `VerdictCut` (no answer).
    """
    # Here: `ckpt-fuzz bisect` imports this module, which needs no thunder.
    from fuzz.judge.thunder_runs import VerdictCut
    from fuzz.judge.verdict import check_spec

    def strip(ordered: Sequence[KnownIssue]) -> NetSpec:
        stripped = spec
        for issue in ordered:
            stripped = issue.without_trigger(stripped)
        return stripped

    # A trigger can depend on what another issue strips (a gelu "after an op" is no longer after one once the op is
    # gone): of both orders, the one that leaves more of the network, so the registry's order never masks.
    stripped = max(strip(issues), strip(list(reversed(issues))), key=lambda s: len(s.layers))
    if not stripped.layers:
        return True
    stripped = with_a_backward(stripped)
    if not valid(stripped):  # taking the trigger out broke the network: no evidence either way
        return False
    with in_flight(stripped):
        outcome = check_spec(stripped, converter=converter, timeout_s=timeout_s, deadline=deadline)
    if outcome.cut_short:
        raise VerdictCut
    if not outcome.valid or outcome.failure is None:
        return outcome.valid
    left = [other for other in others if other not in issues and other.applies(stripped)]
    hidden = [other for other in left if other.reproduced_by(outcome.failure, stripped)]
    rest = [other for other in left if other not in hidden]
    return bool(hidden) and explained_by(stripped, hidden, converter, timeout_s, in_flight, rest, deadline)
