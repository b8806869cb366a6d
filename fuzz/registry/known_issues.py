"""The registry's entries: the known thunder bugs and limitations, each loaded from the ``[issue]`` table of its
``known_issues/<id>/entry.toml`` (its claim in prose, failure classes and triggers; docs/known-issues.md).

A spec an entry matches still runs (unless the entry is ``slow``) and counts as reproduced or not; each entry's
folder also holds its spec, repro.py, recorded signature and the thunder versions it reproduces on.
"""

from __future__ import annotations

from pathlib import Path

from fuzz.generate.spec import NetSpec
from fuzz.judge.failures import ParityFailure
from fuzz.registry.issue import KNOWN_ISSUES_DIR, KnownIssue, installed_thunder
from fuzz.registry.signatures import ENTRY_FILE, tomllib
from fuzz.registry.triggers import EntryError, check_trigger


def _failure_classes(cls: type[ParityFailure] = ParityFailure) -> set[str]:
    return {cls.failure_class} | {name for sub in cls.__subclasses__() for name in _failure_classes(sub)}


_CLAIM_KEYS = {"description", "classes", "trigger", "slow"}


def load_entry(directory: Path) -> KnownIssue:
    """The entry ``directory`` holds; raises `EntryError` (one line: the file and what is wrong) for a bad claim."""
    path = directory / ENTRY_FILE
    try:
        claim = tomllib.loads(path.read_text()).get("issue")
    except (OSError, tomllib.TOMLDecodeError) as error:
        raise EntryError(f"{path}: cannot read the entry ({error})") from None
    if not isinstance(claim, dict):
        raise EntryError(f"{path}: no [issue] table; write its claim as docs/known-issues.md shows")
    if unknown := claim.keys() - _CLAIM_KEYS or {"description", "classes", "trigger"} - claim.keys():
        raise EntryError(f"{path}: [issue] needs exactly {', '.join(sorted(_CLAIM_KEYS))} (slow optional); "
                         f"wrong or missing: {', '.join(sorted(unknown))}")  # fmt: skip
    if not isinstance(claim["description"], str) or not isinstance(claim.get("slow", False), bool):
        raise EntryError(f"{path}: description must be a string and slow true or false")
    if not isinstance(claim["classes"], list) or not claim["classes"] or set(claim["classes"]) - _failure_classes():
        raise EntryError(f"{path}: classes must be among {', '.join(sorted(_failure_classes()))}")
    if not isinstance(claim["trigger"], list) or not claim["trigger"]:
        raise EntryError(f"{path}: the claim needs at least one [[issue.trigger]] table")
    for number, trigger in enumerate(claim["trigger"], 1):
        check_trigger(trigger, f"{path}: trigger {number}")
    return KnownIssue(
        directory.name,
        claim["description"],
        tuple(claim["classes"]),
        tuple(claim["trigger"]),
        slow=claim.get("slow", False),
    )


def load_registry(root: Path = KNOWN_ISSUES_DIR) -> tuple[KnownIssue, ...]:
    """Every entry under ``root`` (one folder with an entry.toml each), in the order of their ids."""
    return tuple(load_entry(path.parent) for path in sorted(root.glob(f"*/{ENTRY_FILE}")))


KNOWN_ISSUES: tuple[KnownIssue, ...] = load_registry()


def known_issues_for(spec: NetSpec) -> list[KnownIssue]:
    """The known issues whose triggers hold for ``spec`` and that are expected on the installed thunder (a failure
    of an entry fixed in this version is a regression, reported as new)."""
    return [issue for issue in KNOWN_ISSUES if issue.applies(spec) and issue.expected_on(installed_thunder())]
