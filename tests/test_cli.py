"""Bad input gets one clear line naming what was wrong and what to do."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

import fuzz.compat
from fuzz.known_issues import KNOWN_ISSUES

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--converter", "fixd"], "argument --converter: invalid choice: 'fixd'"),
        (["--fuzz-device", "tpu"], "argument --fuzz-device: invalid choice: 'tpu'"),
        (
            ["--fuzz-device", "cuda"],
            "--fuzz-device cuda: no CUDA device is available here; use --fuzz-device cpu or auto",
        ),
        (["--hypothesis-profile", "weekly"], "--hypothesis-profile 'weekly' is not one of ci, dev, nightly, replay"),
        (["--fuzz-minutes", "0"], "--fuzz-minutes must be positive, got 0.0"),
        (["--fuzz-shards", "0"], "--fuzz-shards must be at least 1, got 0"),
        (["--fuzz-database", "/proc/fuzz-db"], "--fuzz-database: database /proc/fuzz-db: cannot create it"),
        (["--fuzz-database", "redis://127.0.0.1:1/0"], "database redis://127.0.0.1:1/0: cannot reach Redis"),
        (["--fuzz-database", "s3://bucket/db"], "database s3://bucket/db: unknown scheme"),
        (["--fuzz-layers", "linear,conv2d"], "--fuzz-layers: unknown conv2d; choose from linear, relu"),
        (["--fuzz-dtypes", "float8"], "--fuzz-dtypes: unknown float8; choose from float32, float64, bfloat16, float16"),
        (["--known-issues", "skip"], "argument --known-issues: invalid choice: 'skip'"),
        (["--fuzz-executors", "nvfusr"], "--fuzz-executors: nvfusr not installed; this thunder has python, torch"),
    ],
)
def test_bad_options_are_one_line_errors(args, message, tmp_path):
    if "cuda" in args and __import__("torch").cuda.is_available():
        pytest.skip("a CUDA device is present")
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "fuzz/", "--collect-only", "-q", "--fuzz-artifacts", str(tmp_path), *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode in (4, 2), run.stdout + run.stderr
    assert message in run.stderr, run.stderr[-2000:]


@pytest.mark.parametrize(
    ("versions", "expected"),
    [
        ({"torch": "2.9.1", "lightning-thunder": "0.2.6"}, None),
        (
            {"torch": "2.12.1", "lightning-thunder": "0.2.6"},
            "torch 2.12.1 is incompatible with lightning-thunder 0.2.6",
        ),
        ({"torch": "2.13.0", "lightning-thunder": "0.2.6"}, "install torch==2.9.1"),
    ],
)
def test_incompatible_torch_thunder_pairs_are_named(monkeypatch, versions, expected):
    monkeypatch.setattr(fuzz.compat, "version", versions.__getitem__)
    reason = fuzz.compat.incompatibility()
    assert reason is None if expected is None else expected in reason


def test_known_issues_check_retests_every_registry_entry(tmp_path):
    # The slow entries hit the short time limit, which is one of their registered failure classes.
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "fuzz/", "-q", "-p", "no:logging", "-k", "known_issue_still_reproduces",
         "--known-issues", "check", "--fuzz-timeout", "5", "--fuzz-device", "cpu", "--fuzz-artifacts", str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    checks = json.loads((tmp_path / "latest" / "summary.json").read_text())["known_issue_checks"]
    assert checks == {issue.id: "reproduces" for issue in KNOWN_ISSUES}
    assert "re-tested: reproduces" in run.stdout
