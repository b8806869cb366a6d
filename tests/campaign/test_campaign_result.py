"""A campaign's exit status always agrees with its summary, whatever ends it."""

import json
import os
import subprocess
from pathlib import Path

from fuzz.campaign.families import DECODER
from tests.campaign_runs import ROOT, campaign_command


def _run(tmp: Path, *extra: str, workers: int = 0, **env: str) -> tuple[subprocess.CompletedProcess, dict]:
    # With pytest's logging plugin on, as `make campaign` runs it.
    command = campaign_command(tmp, *extra, workers=workers, logging=True)
    run = subprocess.run(command, cwd=ROOT, env={**os.environ, **env}, capture_output=True, text=True, timeout=600)
    return run, json.loads((tmp / "artifacts" / "latest" / "summary.json").read_text())


def test_a_budget_spent_before_the_first_example_ends_every_shard_cleanly(tmp_path):
    # The shards' share of 1e-9 minutes is gone before Hypothesis draws its first example: it
    # used to fail each shard with a health check while the summary said nothing failed.
    run, summary = _run(tmp_path, "--hypothesis-profile", "nightly", "--fuzz-minutes", "1e-9", workers=2)
    assert run.returncode == 0, run.stdout[-3000:]
    assert summary["result"] == "passed: nothing failed" and summary["harness_errors"] == []
    assert summary["items_out_of_budget_before_first_example"] == 4
    assert "result: passed: nothing failed" in run.stdout
    assert "DEBUG" not in run.stdout + run.stderr


def test_a_budget_spent_after_replaying_the_database_ends_every_shard_cleanly(tmp_path):
    # A database from an earlier run: Hypothesis replays it, the budget runs out, and then its first
    # generated example (the simplest) overruns. That used to fail with "the smallest natural input
    # for this test is very large" while the summary said nothing failed.
    first, _ = _run(tmp_path, "--hypothesis-profile", "dev", "--fuzz-seed", "0")  # 25 examples, not seconds
    assert first.returncode == 0 and any((tmp_path / "db").rglob("*")), first.stdout[-3000:]
    # The clock is the test's (tests/budget_clock.py): the share is spent once the first replayed example is counted.
    run, summary = _run(tmp_path, "--hypothesis-profile", "nightly", "--fuzz-minutes", "30", "-p", "tests.budget_clock")
    assert run.returncode == 0, run.stdout[-3000:]
    assert summary["result"] == "passed: nothing failed" and summary["harness_errors"] == []
    assert summary["examples"] == 1  # it replayed, then its share was spent


def test_a_budget_spent_on_the_explicit_example_ends_its_shard_cleanly(tmp_path):
    # The decoder family's shard 0 first runs thunder's own network (an explicit example, seconds
    # to compile); with the budget gone by then, every generated call overruns: Unsatisfiable.
    run, summary = _run(
        tmp_path, "--hypothesis-profile", "nightly", "--fuzz-minutes", "0.01", "--fuzz-families", DECODER.name
    )
    assert run.returncode == 0, run.stdout[-3000:]
    assert summary["result"] == "passed: nothing failed" and summary["examples"] == 1


def test_an_error_of_the_harness_fails_the_run_and_is_named_in_the_summary_not_blamed_on_thunder(tmp_path):
    run, summary = _run(tmp_path, "--hypothesis-profile", "dev", FUZZ_INJECT_HARNESS_ERROR="1")
    assert run.returncode == 1, run.stdout[-3000:]
    assert summary["failures"] == [] and summary["failing_examples_by_class"] == {}
    [error] = summary["harness_errors"]
    assert error["error"].startswith("KeyError: 'a bug injected into the harness")
    assert summary["result"] == "failed: 1 harness error(s)"
    assert "HARNESS ERROR (ours, not thunder's)" in run.stdout and "result: failed: 1 harness error(s)" in run.stdout
