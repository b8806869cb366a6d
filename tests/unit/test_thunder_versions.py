"""Choosing the thunder under test, and bisecting a repro over thunder versions (real wheels: at most one installed)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from fuzz.registry.issue import installed_thunder
from fuzz.registry.known_issues import KNOWN_ISSUES
from fuzz.versions.bisect import ERROR, NOT_REPRODUCED, REPRODUCES, Trial, bisect, version_record
from fuzz.versions.thunder_versions import PINNED, VersionError, available, is_nightly, nearest, resolve

ROOT = Path(__file__).resolve().parents[2]
CKPT_FUZZ = [sys.executable, "-m", "fuzz.cli"]
# The registry's list, as pip index printed it when this was written (oldest first).
LISTED = ["0.2.4", "0.2.5.dev20250601", "0.2.5", "0.2.6.dev20250901", "0.2.6", "0.2.7.dev20251101", "0.2.7.dev20260201"]


def test_a_request_resolves_to_an_exact_version_or_a_one_line_error_naming_the_nearest():
    assert resolve("nightly", LISTED) == "0.2.7.dev20260201"
    assert resolve("release", LISTED) == "0.2.6"
    assert resolve("0.2.5", LISTED) == "0.2.5"
    with pytest.raises(VersionError) as error:
        resolve("0.2.6.1", LISTED)
    assert "\n" not in str(error.value) and "nearest available: 0.2.6, 0.2.7.dev20251101" in str(error.value)
    assert nearest("9.9", LISTED, 2) == LISTED[-2:] and nearest("0.0.1", LISTED, 2) == LISTED[:2]
    assert [v for v in LISTED if is_nightly(v)] == ["0.2.5.dev20250601", "0.2.6.dev20250901", *LISTED[-2:]]


def _results(**by_version: str):
    calls = []

    def run(version: str) -> Trial:
        calls.append(version)
        return Trial(version, by_version[version], 0.0, "")

    return run, calls


def test_bisection_finds_first_bad_and_first_good_skipping_versions_that_cannot_run():
    versions = [f"0.3.{i}" for i in range(12)]
    results = {v: NOT_REPRODUCED for v in versions}
    results.update({v: REPRODUCES for v in versions[4:9]})  # introduced in 0.3.4, fixed in 0.3.9
    results["0.3.7"] = results["0.3.8"] = ERROR
    run, calls = _results(**results)
    trials, boundaries = bisect(versions, [versions[0], "0.3.5", versions[-1]], run)
    assert [b.after.version for b in boundaries] == ["0.3.4", "0.3.9"]
    assert boundaries[0].describe().startswith("first bad: 0.3.4") and "last good: 0.3.3" in boundaries[0].describe()
    assert boundaries[1].describe().startswith("first good: 0.3.9") and "0.3.7, 0.3.8" in boundaries[1].describe()
    assert len(calls) == len(set(calls)) < len(versions)  # each version at most once, not all of them
    assert [t.version for t in trials] == sorted(calls, key=lambda v: int(v.rsplit(".", 1)[1]))


def test_an_anchor_that_cannot_run_is_stood_in_for_by_its_nearest_version_that_can():
    versions = [f"0.3.{i}" for i in range(12)]
    results = {v: NOT_REPRODUCED for v in versions[:3]} | {v: REPRODUCES for v in versions[3:]}
    results["0.3.11"] = results["0.3.10"] = ERROR  # the newest nightlies are broken; 0.3.9 still reproduces
    results["0.3.0"] = ERROR
    run, calls = _results(**results)
    trials, boundaries = bisect(versions, [versions[0], versions[-1]], run)
    assert calls[:5] == ["0.3.0", "0.3.1", "0.3.11", "0.3.10", "0.3.9"]
    assert [b.describe().split(" (")[0] for b in boundaries] == ["first bad: 0.3.3"]
    results.update({v: ERROR for v in versions[6:]})  # more broken neighbours than the stand-ins it tries
    run, calls = _results(**results)
    bisect(versions, [versions[-1]], run)
    assert calls == ["0.3.11", "0.3.10", "0.3.9", "0.3.8"]


def test_a_record_names_where_the_issue_was_introduced_and_fixed_from_every_version_checked():
    checked = {"0.3.0": NOT_REPRODUCED, "0.3.2": REPRODUCES, "0.3.1": ERROR, "0.3.5": NOT_REPRODUCED}
    record = version_record({**checked, "0.3.4": REPRODUCES})
    assert (record["introduced_in"], record["fixed_in"]) == ("0.3.2", "0.3.5")
    assert record["reproduces_on"] == ["0.3.2", "0.3.4"] and list(record["checked"])[:2] == ["0.3.0", "0.3.1"]
    still_live = version_record({"0.3.0": REPRODUCES, "0.3.5": NOT_REPRODUCED, "0.3.9": REPRODUCES})
    assert (still_live["introduced_in"], still_live["fixed_in"]) == (None, None)  # back on the newest: no fix
    with pytest.raises(ValueError, match="reproduced on no version"):
        version_record({"0.3.0": NOT_REPRODUCED, "0.3.1": ERROR})


def test_an_entry_fixed_in_a_version_stops_being_expected_there(tmp_path, monkeypatch):
    issue = KNOWN_ISSUES[0]
    assert all(entry.expected_on(PINNED) for entry in KNOWN_ISSUES)  # every entry reproduces on the pinned release
    monkeypatch.setattr("fuzz.registry.issue.KNOWN_ISSUES_DIR", tmp_path)
    (tmp_path / issue.id).mkdir()
    record = {"reproduces_on": ["0.2.6"], "introduced_in": "0.2.6", "fixed_in": "0.2.7"}
    (tmp_path / issue.id / "versions.json").write_text(json.dumps(record))
    assert issue.expected_on("0.2.6") and not issue.expected_on("0.2.7") and not issue.expected_on("0.2.8")
    assert issue.status(False, "0.2.5") == ("not expected: introduced in 0.2.6", True)
    assert issue.status(False, "0.2.7") == ("not expected: fixed in 0.2.7", True)
    assert issue.status(True, "0.2.7") == ("reproduces outside its recorded range (fixed in 0.2.7)", False)
    assert issue.status(False, "0.2.6") == ("no longer reproduces", False)


def _ckpt_fuzz(*arguments: str, timeout: float = 900) -> subprocess.CompletedProcess:
    return subprocess.run([*CKPT_FUZZ, *arguments], cwd=ROOT, capture_output=True, text=True, timeout=timeout)


def test_an_unknown_thunder_version_is_a_one_line_error_before_anything_runs():
    ran = _ckpt_fuzz("check", "known_issues/narrow-then-inplace-crash", "--thunder", "0.2.99")
    assert ran.returncode == 2, ran.stdout + ran.stderr
    (line,) = ran.stderr.strip().splitlines()
    assert "0.2.99" in line and "nearest available:" in line and not ran.stdout.strip()
    made = subprocess.run(
        [sys.executable, "-m", "fuzz.versions.thunder_versions", "use", "0.2.99"],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert made.returncode == 2 and "THUNDER=0.2.99" in made.stderr and "nearest available:" in made.stderr


@pytest.mark.slow
def test_the_newest_nightly_runs_a_repro_and_bisection_names_the_version_that_fixed_it():
    """narrow-then-inplace-crash reproduces on the pinned release and is fixed on the newest nightly (measured when
    issue 16 was filed): `check --thunder` and `bisect` on those two versions install one wheel."""
    newest = resolve("nightly", available())
    assert installed_thunder() == PINNED
    pinned = _ckpt_fuzz("check", "known_issues/narrow-then-inplace-crash", "--device", "cpu")
    assert pinned.returncode == 1, pinned.stdout + pinned.stderr
    nightly = _ckpt_fuzz("check", "known_issues/narrow-then-inplace-crash", "--device", "cpu", "--thunder", "nightly")
    assert nightly.returncode == 0, nightly.stdout + nightly.stderr
    assert f"on lightning-thunder {newest}" in nightly.stdout and "PASS" in nightly.stdout
    bisected = _ckpt_fuzz("bisect", "narrow-then-inplace-crash", "--versions", f"{PINNED},{newest}")
    assert bisected.returncode == 0, bisected.stdout + bisected.stderr
    assert f"first good: {newest}" in bisected.stdout and f"last bad: {PINNED}" in bisected.stdout
    rows = [line.split() for line in bisected.stdout.splitlines() if line.startswith((PINNED + " ", newest + " "))]
    assert [row[0] for row in rows] == [PINNED, newest] and "reproduces" in " ".join(rows[0])
