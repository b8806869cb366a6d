"""One campaign launched as several jobs (a Slurm job array, a Kubernetes indexed Job): their run folders merged.

Each job writes its own run folder (`fuzz.report.run_folder`); `merge_runs` adds their counters up into one
summary.json, keeps each distinct failure once (jobs sharing one example database often shrink to the same
minimal network: the same failure id) with how many shards of all jobs found it, and copies its folder.
"""

from __future__ import annotations

import json
import shutil
import zlib
from collections import Counter
from pathlib import Path
from typing import Any

from fuzz.report.run_folder import SUMMARY, UNSHRUNK, check_run_id, find_run, new_run_id, write_atomically
from fuzz.report.stats import CampaignStats
from fuzz.report.summary import counters


class MergeError(ValueError):
    """Run folders that cannot be merged; the message says which and why."""


def campaign_seed(campaign: str) -> int:
    """A fleet campaign's default base seed: the same for every job of it, another for the next campaign."""
    return zlib.crc32(campaign.encode())


def job_seed(base_seed: int, job_index: int, shards: int) -> int:
    """The ``--fuzz-seed`` of job ``job_index`` of a campaign: its shards take the seeds after the previous job's, so
    no two shards of the campaign generate alike (shard i of a run uses its seed + i)."""
    if job_index < 0 or shards < 1:
        raise ValueError(f"job index {job_index} and shards {shards}: need an index >= 0 and shards >= 1")
    return base_seed + job_index * shards


def _read(run: Path) -> dict[str, Any]:
    try:
        return json.loads((run / SUMMARY).read_text())
    except (OSError, ValueError) as error:
        raise MergeError(f"{run}: no readable {SUMMARY} ({error}); pass the run folders the jobs wrote") from None


def _same(summaries: list[dict[str, Any]], key: str) -> Any:
    values = {json.dumps(summary.get(key), sort_keys=True) for summary in summaries}
    if len(values) > 1:
        raise MergeError(f"the runs differ in {key!r} ({', '.join(sorted(values))}): they are not one campaign")
    return summaries[0].get(key)


def _result(summary: dict[str, Any], results: list[str]) -> str:
    """The merged result line: failed when any job found something or broke, else interrupted/errored/passed."""
    reasons = [
        f"{len(items)} {what}"
        for items, what in (
            (summary["failures"], "failure(s)"),
            (summary["unshrunk_failures"], "failure(s) not shrunk (a job was stopped first)"),
            (summary["harness_errors"], "harness error(s)"),
            (summary["other_failed_tests"], "other failed test(s)"),
        )
        if items
    ]
    if reasons or any(result.startswith("failed") for result in results):
        return "failed: " + (", ".join(reasons) or "a job failed (see its own summary)")
    for start in ("interrupted", "pytest error"):
        if stopped := [result for result in results if result.startswith(start)]:
            return f"{stopped[0]} (in {len(stopped)} of {len(results)} jobs)"
    return "passed: nothing failed"


def _folder(run: Path, summary: dict[str, Any], failure: dict[str, Any]) -> Path:
    """The folder of a listed ``failure`` inside ``run``, wherever the run folder has moved since: its repro's path
    below the run's id (a variant, a failure left while reducing, an unshrunk one), else ``<run>/<id>``."""
    parts = Path(failure["repro"]).parts
    if summary["run_id"] in parts:
        return run.joinpath(*parts[parts.index(summary["run_id"]) + 1 : -1])
    return run / failure["id"]


def merge_named_runs(artifacts: Path, run_ids: list[str], into: str | None) -> dict[str, Any]:
    """`merge_runs` of the runs ``run_ids`` under ``artifacts`` into ``artifacts/into`` (a fresh id when None);
    FileNotFoundError or ValueError with a one-line message for a run not found or a bad id."""
    runs = [find_run(artifacts, run) for run in run_ids]
    if into:
        check_run_id(into)
    return merge_runs(runs, artifacts / (into or new_run_id("merged")))


def merge_runs(runs: list[Path], into: Path) -> dict[str, Any]:
    """Merge the run folders ``runs`` into the new folder ``into`` (its summary.json and failure folders)."""
    if len(set(map(Path.resolve, runs))) != len(runs):
        raise MergeError("a run folder is listed twice: each job's folder once")
    summaries = [_read(run) for run in runs]
    if into.exists():
        raise MergeError(f"{into} exists; a merge never overwrites a run")
    same = {key: _same(summaries, key) for key in ("profile", "device", "converter", "found_with", "executors")}
    replay_options = _same(summaries, "replay_options")
    stats = CampaignStats()
    for summary in summaries:
        job = CampaignStats.from_dict(summary)
        job.gpus = {f"{summary['run_id']}/{worker}": gpu for worker, gpu in job.gpus.items()}  # every job has a gw0
        stats.merge(job)
    wall = max(summary["wall_seconds"] for summary in summaries)
    into.mkdir(parents=True)
    failures: dict[str, dict[str, Any]] = {}
    for run, summary in zip(runs, summaries, strict=True):
        for failure in summary["failures"]:
            if failure["id"] in failures:
                failures[failure["id"]]["found_by_shards"] += failure["found_by_shards"]
                failures[failure["id"]]["found_by_jobs"] += 1
                continue
            shutil.copytree(_folder(run, summary, failure), into / failure["id"])
            failures[failure["id"]] = {**failure, "repro": str(into / failure["id"] / "repro.py"), "found_by_jobs": 1}
    unshrunk: dict[str, dict[str, Any]] = {}
    for run, summary in zip(runs, summaries, strict=True):
        for failure in summary.get("unshrunk_failures", ()):
            if failure["id"] in failures or failure["id"] in unshrunk:
                continue
            shutil.copytree(_folder(run, summary, failure), into / UNSHRUNK / failure["id"])
            unshrunk[failure["id"]] = {**failure, "repro": str(into / UNSHRUNK / failure["id"] / "repro.py")}
    merged = {
        "run_id": into.name,
        "merged_from": [summary["run_id"] for summary in summaries],
        "command": " && ".join(summary["command"] for summary in summaries),
        **same,
        "seed": [summary["seed"] for summary in summaries],
        **counters(stats, wall),
        "failures": list(failures.values()),
        "unshrunk_failures": list(unshrunk.values()),
        "items_out_of_budget_before_first_example": sum(
            summary["items_out_of_budget_before_first_example"] for summary in summaries
        ),
        "harness_errors": [error for summary in summaries for error in summary["harness_errors"]],
        "other_failed_tests": [test for summary in summaries for test in summary["other_failed_tests"]],
        "warnings": dict(sum((Counter(summary["warnings"]) for summary in summaries), Counter())),
        "replay_options": replay_options,
    }
    merged["result"] = _result(merged, [summary["result"] for summary in summaries])
    write_atomically(into / SUMMARY, json.dumps(merged, indent=2, sort_keys=True))
    return merged
