"""Workers on GPU boxes (`fuzz.campaign.gpus`): which GPU each xdist worker gets and how many workers ``-n auto``
starts.

No CUDA here: GPUs are simulated by listing ids with ``--fuzz-gpus``, which pins workers on any device.
"""

import json

import pytest

from fuzz.campaign.gpus import auto_worker_count, gpu_of_worker, parse_gpu_list, pin_to_gpu
from tests.campaign_runs import run_campaign


@pytest.mark.parametrize(
    ("gpus", "workers", "expected"),
    [
        (1, 2, ["0", "0"]),
        (2, 4, ["0", "1", "0", "1"]),
        (8, 8, [str(i) for i in range(8)]),
        (8, 16, [str(i % 8) for i in range(16)]),
    ],
)
def test_worker_i_runs_on_gpu_i_mod_count(gpus: int, workers: int, expected: list[str]) -> None:
    ids = [str(i) for i in range(gpus)]
    assert [gpu_of_worker(f"gw{i}", ids) for i in range(workers)] == expected


def test_a_replacement_worker_keeps_the_round_robin() -> None:
    # xdist numbers a worker that replaces a dead one after the others: gw2 on a 2-worker, 2-GPU run.
    assert gpu_of_worker("gw2", ("3", "5")) == "3"


@pytest.mark.parametrize(
    ("gpus", "per_gpu", "cores", "expected"),
    [(1, 2, 16, 2), (2, 2, 16, 4), (8, 2, 16, 16), (8, 2, 64, 16), (8, 4, 16, 16), (8, 1, 4, 4), (1, 1, 1, 1)],
)
def test_auto_worker_count_is_workers_per_gpu_capped_by_cores(gpus, per_gpu, cores, expected) -> None:
    assert auto_worker_count(gpus, per_gpu, cores) == expected


@pytest.mark.parametrize(("text", "problem"), [("", "no GPU id"), (" , ", "no GPU id"), ("0,1,0", "repeated")])
def test_a_bad_gpu_list_is_named(text: str, problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        parse_gpu_list(text)


def test_pinning_after_cuda_started_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    with pytest.raises(RuntimeError, match="before this worker was pinned"):
        pin_to_gpu("0")


def test_n_auto_starts_workers_per_gpu_and_each_sees_only_its_gpu(tmp_path) -> None:
    """A real campaign with ``-n auto`` on one simulated GPU, one worker per GPU: one worker (xdist alone would start
    one per core), and that worker really sees only its GPU."""
    result = run_campaign(
        tmp_path, "--fuzz-gpus", "5", "--fuzz-workers-per-gpu", "1", "--fuzz-minutes", "0.01", fault=None,
        workers="auto",
    )  # fmt: skip
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert "created: 1/1 worker" in result.stdout
    summary = json.loads(next((tmp_path / "artifacts").glob("*/summary.json")).read_text())
    assert summary["gpus"] == {"gw0": "5"}
    assert "workers pinned to GPUs (CUDA_VISIBLE_DEVICES): gw0 -> 5" in result.stdout


def test_fuzz_gpus_count_within_an_inherited_allocation(monkeypatch: pytest.MonkeyPatch) -> None:
    from fuzz.campaign.gpus import visible_gpus

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "4,5")  # what Slurm or Kubernetes gave the job
    assert visible_gpus("1,0") == ("5", "4")
    with pytest.raises(ValueError, match="2 not among the 2 GPUs this run was given"):
        visible_gpus("0,2")


def test_a_bad_workers_per_gpu_is_a_usage_error(tmp_path) -> None:
    result = run_campaign(tmp_path, "--fuzz-gpus", "0", "--fuzz-workers-per-gpu", "0", fault=None, workers="auto")
    assert result.returncode == 4, result.stdout[-2000:] + result.stderr[-2000:]
    assert "--fuzz-workers-per-gpu must be at least 1, got 0" in result.stdout + result.stderr
