"""One campaign as N scheduler jobs (a Slurm job array, a Kubernetes indexed Job): index -> seed, the launch
files, and `ckpt-fuzz report --merge` over the jobs' run folders (3 local jobs on one loopback Redis)."""

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from fuzz.campaign.families import GENERAL, PROGRAM
from fuzz.cli import _parser
from fuzz.report.merge import job_seed
from tests.campaign.test_fleet import redis_url  # noqa: F401 (the fixture)
from tests.campaign_runs import ROOT, fault_everywhere

SLURM_SCRIPT = ROOT / "deploy" / "slurm" / "ckpt-fuzz-array.sbatch"
K8S_JOB = ROOT / "deploy" / "kubernetes" / "ckpt-fuzz-indexed-job.yaml"


def test_a_job_refuses_pytest_options_that_would_undo_its_seed_or_folder(capsys):
    from fuzz.cli import main

    assert main(["run", "--job-index", "1", "--fuzz-seed", "3"]) == 4
    assert "--fuzz-seed would undo the job's own" in capsys.readouterr().err


def test_every_campaign_gets_its_own_default_seed():
    from fuzz.report.merge import campaign_seed

    assert campaign_seed("ckpt-fuzz-4711") == campaign_seed("ckpt-fuzz-4711") != campaign_seed("ckpt-fuzz-4712")


def test_every_shard_of_every_job_gets_its_own_seed():
    shards, jobs = 8, 5
    seeds = [job_seed(100, job, shards) + shard for job in range(jobs) for shard in range(shards)]
    assert len(set(seeds)) == jobs * shards and min(seeds) == 100
    assert [job_seed(0, job, 8) for job in range(3)] == [0, 8, 16]
    with pytest.raises(ValueError, match="index -1"):
        job_seed(0, -1, 8)


def _run_arguments(command: list[str]):
    """``ckpt-fuzz run`` arguments as the CLI parses them (the extra ones go to pytest)."""
    assert command[1] == "run", command
    return _parser().parse_known_args(command[1:])


def test_the_slurm_array_script_runs_the_task_as_that_job(tmp_path):
    """A shell-level dry run: the script with Slurm's variables, ``ckpt-fuzz`` replaced by ``echo``."""
    env = {
        **os.environ,
        "SLURM_ARRAY_TASK_ID": "2",
        "SLURM_ARRAY_JOB_ID": "4711",
        "FUZZ_REDIS": "redis://10.0.0.5:6379/0",
        "CKPT_FUZZ": "echo ckpt-fuzz",
        "MINUTES": "30",
    }
    dry = subprocess.run(["bash", str(SLURM_SCRIPT)], env=env, capture_output=True, text=True, timeout=30)
    assert dry.returncode == 0, dry.stderr
    args, extra = _run_arguments(shlex.split(dry.stdout))
    assert (args.job_index, args.seed, args.campaign, args.minutes) == (2, None, "ckpt-fuzz-4711", 30.0)
    requeued = subprocess.run(["bash", str(SLURM_SCRIPT)], env={**env, "SLURM_RESTART_COUNT": "1", "SEED": "7"},
                              capture_output=True, text=True, timeout=30)  # fmt: skip
    args, _ = _run_arguments(shlex.split(requeued.stdout))
    assert (args.campaign, args.seed) == ("ckpt-fuzz-4711-r1", 7)
    assert extra[:2] == ["--fuzz-database", "redis://10.0.0.5:6379/0"]
    missing = subprocess.run(["bash", str(SLURM_SCRIPT)], env={**env, "FUZZ_REDIS": ""}, capture_output=True, text=True)
    assert missing.returncode != 0 and "set FUZZ_REDIS" in missing.stderr


def test_the_kubernetes_manifest_is_a_valid_indexed_job():
    from kubernetes.client import ApiClient, V1Job

    manifest = yaml.safe_load(K8S_JOB.read_text())
    client = ApiClient()
    # Deserializing into the client's V1Job checks types and required fields; serializing it back drops any field the
    # Job schema does not have, so the round trip must give the manifest back unchanged.
    job = client._ApiClient__deserialize(manifest, "V1Job")
    assert isinstance(job, V1Job)
    assert client.sanitize_for_serialization(job) == manifest
    assert (job.api_version, job.kind, job.spec.completion_mode) == ("batch/v1", "Job", "Indexed")
    assert job.spec.completions == job.spec.parallelism and job.spec.template.spec.restart_policy == "Never"
    (container,) = job.spec.template.spec.containers
    args, extra = _run_arguments(container.command)
    assert container.command[0].endswith("ckpt-fuzz") and args.job_index is None  # from $JOB_COMPLETION_INDEX
    assert args.campaign == "$(CAMPAIGN)" and container.env[0].name == "CAMPAIGN"  # the Job's own name
    assert container.env[0].value_from.field_ref.field_path == "metadata.labels['batch.kubernetes.io/job-name']"
    assert any(option.startswith("--fuzz-database=redis://") for option in extra)


def _summary(run_id: str, examples: int, failure_ids: list[str], result: str) -> dict:
    from fuzz.report.stats import CampaignStats

    stats = CampaignStats(examples=examples, valid=examples, gpus={"gw0": "0"})
    return {
        "run_id": run_id, "command": f"ckpt-fuzz run ({run_id})", "profile": "nightly", "device": "cpu",
        "converter": "fixed", "found_with": "thunder X", "executors": [], "seed": 0, "wall_seconds": 10.0,
        **stats.to_dict(),
        "failures": [{"id": i, "repro": f"{i}/repro.py", "found_by_shards": 1} for i in failure_ids],
        "items_out_of_budget_before_first_example": 0, "harness_errors": [], "other_failed_tests": [],
        "warnings": {}, "replay_options": {"fuzz-shards": 8}, "result": result,
    }  # fmt: skip


def _write_run(root: Path, summary: dict) -> Path:
    folder = root / summary["run_id"]
    for failure in summary["failures"]:
        (folder / failure["id"]).mkdir(parents=True)
        (folder / failure["id"] / "repro.py").write_text("# repro\n")
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "summary.json").write_text(json.dumps(summary))
    return folder


def test_a_merge_adds_counters_and_keeps_each_failure_once(tmp_path):
    from fuzz.report.merge import merge_runs

    runs = [
        _write_run(tmp_path, _summary("a-job0", 5, ["f1"], "failed: 1 failure(s)")),
        _write_run(tmp_path, _summary("a-job1", 7, ["f1", "f2"], "failed: 2 failure(s)")),
        _write_run(tmp_path, _summary("a-job2", 3, [], "passed: nothing failed")),
    ]
    merged = merge_runs(runs, tmp_path / "merged")
    assert merged["examples"] == 15 and merged["merged_from"] == ["a-job0", "a-job1", "a-job2"]
    assert [(f["id"], f["found_by_jobs"], f["found_by_shards"]) for f in merged["failures"]] == [
        ("f1", 2, 2),
        ("f2", 1, 1),
    ]
    assert (tmp_path / "merged" / "f2" / "repro.py").is_file()
    assert set(merged["gpus"]) == {"a-job0/gw0", "a-job1/gw0", "a-job2/gw0"}  # no job's workers hide another's
    assert merged["result"] == "failed: 2 failure(s)"


def test_a_merge_keeps_what_a_stopped_job_found_before_shrinking_it(tmp_path):
    from fuzz.report.merge import merge_runs

    stopped = _summary("a-job1", 4, [], "interrupted: the run was stopped; what it found so far is listed")
    unshrunk = tmp_path / "a-job1" / "unshrunk" / "u1"
    unshrunk.mkdir(parents=True)
    (unshrunk / "repro.py").write_text("# repro\n")
    # Recorded where the job ran; the folder has moved since (CI artifacts downloaded elsewhere).
    moved = "/ran/elsewhere/a-job1/unshrunk/u1/repro.py"
    stopped["unshrunk_failures"] = [{"id": "u1", "repro": moved, "class": "accuracy"}]
    runs = [_write_run(tmp_path, _summary("a-job0", 5, [], "passed: nothing failed")), _write_run(tmp_path, stopped)]
    merged = merge_runs(runs, tmp_path / "merged")
    assert [f["id"] for f in merged["unshrunk_failures"]] == ["u1"]
    assert (tmp_path / "merged" / "unshrunk" / "u1" / "repro.py").is_file()
    assert merged["result"] == "failed: 1 failure(s) not shrunk (a job was stopped first)"


@pytest.mark.parametrize(
    ("change", "problem"), [({"found_with": "thunder Y"}, "differ in 'found_with'"), ({}, "listed twice")]
)
def test_runs_of_different_campaigns_or_a_run_listed_twice_are_not_merged(tmp_path, change, problem):
    from fuzz.report.merge import MergeError, merge_runs

    first = _write_run(tmp_path, _summary("b-job0", 1, [], "passed: nothing failed"))
    second = _write_run(tmp_path, {**_summary("b-job1", 1, [], "passed: nothing failed"), **change})
    with pytest.raises(MergeError, match=problem):
        merge_runs([first, second] if change else [first, first], tmp_path / "merged")
    assert not (tmp_path / "merged").exists()


def _merge_jobs(root: Path) -> subprocess.CompletedProcess:
    """`ckpt-fuzz report --merge` of the 3 jobs' run folders into ``root/merged``."""
    command = [sys.executable, "-m", "fuzz.cli", "report", "--artifacts", str(root), "--into", "merged", "--merge"]
    command += [str(root / f"local-job{i}") for i in range(3)]
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300)


def _job(index: int, redis: str, root: Path) -> subprocess.Popen:
    """Job ``index`` of a 3-job campaign with a faulty tanh gradient, as the scheduler would start it. Two minutes
    each: the budget counts from the job's start, and three jobs starting together on 2 loaded cores spent 25 s of a
    half-minute budget on imports and thunder's first compile, and then found nothing."""
    command = [
        *(sys.executable, "-m", "fuzz.cli", "run", "--minutes", "2", "-n", "0", "--device", "cpu"),
        *("--shards", "1", "--seed", "0", "--campaign", "local", "--artifacts", str(root)),
        *("-p", "tests.faults", "--fuzz-families", f"{GENERAL.name},{PROGRAM.name}", "--fuzz-layers", "tanh,relu"),
        *("--fuzz-dtypes", "float32", "--fuzz-database", redis),
    ]
    env = {**os.environ, **fault_everywhere("tanh-grad-x2"), "JOB_COMPLETION_INDEX": str(index)}
    env.pop("SLURM_ARRAY_TASK_ID", None)  # it would win over Kubernetes' variable
    return subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


@pytest.mark.slow
def test_three_jobs_on_one_redis_merge_into_one_summary_without_duplicates(redis_url, tmp_path):  # noqa: F811
    root = tmp_path / "artifacts"
    jobs = [_job(index, redis_url, root) for index in range(3)]
    outputs = [job.communicate(timeout=900)[0] for job in jobs]
    assert [job.returncode for job in jobs] == [1, 1, 1], "\n".join(output[-2000:] for output in outputs)
    summaries = [json.loads((root / f"local-job{i}" / "summary.json").read_text()) for i in range(3)]
    assert [summary["seed"] for summary in summaries] == [0, 1, 2]  # job i: seed 0 + i x 1 shard
    merge = _merge_jobs(root)
    assert merge.returncode == 1, merge.stdout + merge.stderr  # the merged campaign found the fault
    merged = json.loads((root / "merged" / "summary.json").read_text())
    print(
        f"jobs: examples {[s['examples'] for s in summaries]}, failures {[len(s['failures']) for s in summaries]}; "
        f"merged: {merged['examples']} examples, {[(f['id'], f['found_by_jobs']) for f in merged['failures']]}"
    )
    assert merged["merged_from"] == ["local-job0", "local-job1", "local-job2"]
    for counter in ("examples", "valid", "compiled_by_thunder", "repeats", "discarded"):
        assert merged[counter] == sum(summary[counter] for summary in summaries), counter
    distinct = {failure["id"] for summary in summaries for failure in summary["failures"]}
    assert sorted(failure["id"] for failure in merged["failures"]) == sorted(distinct)  # each failure once
    for failure in merged["failures"]:
        found_by = [s for s in summaries if failure["id"] in {f["id"] for f in s["failures"]}]
        assert failure["found_by_jobs"] == len(found_by)
        assert (root / "merged" / failure["id"] / "repro.py").is_file()
    assert merged["result"].startswith("failed: ") and (root / "merged" / "report.html").is_file()
    again = _merge_jobs(root)
    assert again.returncode == 2 and "exists; a merge never overwrites a run" in again.stderr
