"""Run a repro.py over thunder versions and find where its verdict changes (the version that broke or fixed it).

A repro.py exits 0 (thunderfx matches), 1 (the failure reproduces) or 2 (could not run): 2, a run past the
bisection's per-version ``timeout_s`` or any other status is an "error" and is skipped by the bisection, as
``git bisect skip`` does. Imports no torch.
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from packaging.version import Version

from fuzz.versions.thunder_versions import build_date, located

REPRODUCES, NOT_REPRODUCED, ERROR = "reproduces", "not reproduced", "error"
_FOUND_WITH = re.compile(r"Found with lightning-thunder (\S+?),")


@dataclass(frozen=True)
class Trial:
    """One run of the repro on one thunder version."""

    version: str
    result: str  # REPRODUCES, NOT_REPRODUCED or ERROR
    seconds: float
    detail: str  # the repro's last line of output


@dataclass(frozen=True)
class Boundary:
    """Where the result changes between two neighbouring versions that ran (``before`` < ``after``), with the
    versions between them that could not run."""

    before: Trial
    after: Trial
    skipped: tuple[str, ...]

    def describe(self) -> str:
        change = "first bad" if self.after.result == REPRODUCES else "first good"
        between = f" ({len(self.skipped)} version(s) between could not run: {', '.join(self.skipped)})"
        return f"{change}: {self.after.version} {build_date(self.after.version)}".rstrip() + (
            between if self.skipped else f" (last {'good' if change == 'first bad' else 'bad'}: {self.before.version})"
        )


def found_on(repro: Path) -> str | None:
    """The thunder version a repro.py was written on (its header's "Found with lightning-thunder V, ...")."""
    match = _FOUND_WITH.search(repro.read_text())
    return match.group(1) if match else None


def run_repro(repro: Path, version: str, timeout_s: float) -> Trial:
    """``repro`` run in a fresh interpreter on thunder ``version`` (installed into the cache when missing)."""
    started = time.monotonic()
    try:
        environment = located(version).environment()
    except ValueError as error:  # thunder_versions.VersionError: the wheel does not install
        return Trial(version, ERROR, time.monotonic() - started, str(error))
    try:
        ran = subprocess.run(
            [sys.executable, str(repro)], cwd=repro.parent, env=environment, capture_output=True, text=True,
            timeout=timeout_s, check=False,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        return Trial(version, ERROR, time.monotonic() - started, f"timed out after {timeout_s:.0f} s")
    lines = (ran.stdout + ran.stderr).strip().splitlines()
    result = {0: NOT_REPRODUCED, 1: REPRODUCES}.get(ran.returncode, ERROR)
    detail = next((line for line in reversed(ran.stdout.strip().splitlines()) if line.strip()), "")
    if result == ERROR:
        detail = f"exit {ran.returncode}: " + (lines[-1] if lines else "")
    return Trial(version, result, time.monotonic() - started, detail[:200])


def bisect(versions: list[str], anchors: list[str], run: Callable[[str], Trial]) -> tuple[list[Trial], list[Boundary]]:
    """Run ``versions`` (oldest first) where needed to find every change of result: first the ``anchors`` (e.g. the
    oldest, the one a failure was found on, the newest), then a bisection between each two neighbours that
    differ. Returns the trials in version order and the boundaries found; assumes a result changes at most
    once between two anchors."""
    order = sorted(versions, key=Version)
    trials: dict[str, Trial] = {}

    def trial(version: str) -> Trial:
        if version not in trials:
            trials[version] = run(version)
        return trials[version]

    for anchor in sorted({a for a in anchors if a in order}, key=Version):
        if trial(anchor).result == ERROR:
            _stand_in(order, anchor, trial)
    boundaries = []
    ran = [v for v in order if v in trials and trials[v].result != ERROR]
    for low, high in zip(ran, ran[1:], strict=False):
        if trials[low].result != trials[high].result:
            boundaries.append(_narrow(order, low, high, trial))
    return [trials[v] for v in order if v in trials], boundaries


def _stand_in(order: list[str], anchor: str, trial: Callable[[str], Trial], tries: int = 3) -> None:
    """After ``anchor`` could not run, its nearest versions (the newer first at equal distance) until one runs, at
    most ``tries``: a broken newest nightly must not leave the range up to it untried."""
    at = order.index(anchor)
    nearest = sorted((i for i in range(len(order)) if i != at), key=lambda i: (abs(i - at), -i))
    for version in (order[i] for i in nearest[:tries]):
        if trial(version).result != ERROR:
            return


def _narrow(order: list[str], low: str, high: str, trial: Callable[[str], Trial]) -> Boundary:
    """Bisect between ``low`` and ``high`` (different results) to two neighbouring versions that ran."""
    skipped: set[str] = set()
    while True:
        between = [v for v in order[order.index(low) + 1 : order.index(high)] if v not in skipped]
        if not between:
            gap = tuple(v for v in order[order.index(low) + 1 : order.index(high)])
            return Boundary(trial(low), trial(high), gap)
        middle = between[len(between) // 2]
        found = trial(middle)
        if found.result == ERROR:
            skipped.add(middle)
        elif found.result == trial(low).result:
            low = middle
        else:
            high = middle


def version_record(checked: dict[str, str]) -> dict:
    """What a known issue's record says, from every version ``checked`` (version -> result): the versions it
    reproduces on; ``introduced_in``, the first reproducing version after one that did not (None: it reproduces
    on the oldest that ran); ``fixed_in``, the first version after the newest reproducing one, when that one did
    not reproduce (None: it reproduces on the newest that ran)."""
    ran = [(v, checked[v]) for v in sorted(checked, key=Version) if checked[v] != ERROR]
    reproduces = [v for v, result in ran if result == REPRODUCES]
    if not reproduces:
        raise ValueError("the repro reproduced on no version: nothing to record")
    first, last = ran.index((reproduces[0], REPRODUCES)), ran.index((reproduces[-1], REPRODUCES))
    return {
        "reproduces_on": reproduces,
        "introduced_in": reproduces[0] if first > 0 else None,
        "fixed_in": ran[last + 1][0] if last + 1 < len(ran) else None,
        "checked": dict(sorted(checked.items(), key=lambda item: Version(item[0]))),
    }


def table(trials: list[Trial]) -> list[str]:
    """The trials as aligned text rows: version, build date, result, seconds, the repro's last line."""
    rows = [("version", "date", "result", "seconds", "repro said")]
    rows += [(t.version, build_date(t.version), t.result, f"{t.seconds:.1f}", t.detail[:90]) for t in trials]
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    return [
        "  ".join(cell.ljust(width) for cell, width in zip(row[:4], widths, strict=True)) + "  " + row[4]
        for row in rows
    ]
