"""The GPU smoke script (tools/gpu_smoke.py), as far as a machine without CUDA allows: it refuses to pretend, and
its rehearsal on CPU runs every step into one folder."""

import json
import subprocess
import sys

import pytest
import torch

from tests.campaign_runs import ROOT


@pytest.mark.skipif(torch.cuda.is_available(), reason="on a CUDA machine the script runs for real")
def test_without_cuda_it_says_so_and_exits_2(tmp_path):
    run = subprocess.run(
        [sys.executable, "tools/gpu_smoke.py", "--out", str(tmp_path / "out")], cwd=ROOT, capture_output=True, text=True
    )
    assert run.returncode == 2 and "no CUDA device here" in run.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_the_rehearsal_on_cpu_runs_every_step_into_one_folder(tmp_path):
    out = tmp_path / "smoke"
    command = [sys.executable, "tools/gpu_smoke.py", "--device", "cpu", "--out", str(out)]
    run = subprocess.run([*command, "--minutes", "0.2", "--examples", "1"], cwd=ROOT, capture_output=True, text=True)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    results = json.loads((out / "results.json").read_text())
    print(json.dumps(results, indent=1))
    assert results["versions"]["thunder"] and results["versions"]["transformers"]
    assert [row["converter"] for row in results["seed_network"]] == ["fixed", "stock"]
    assert all(row["verdict"] == "pass" and row["compiled_every_checkpoint"] for row in results["seed_network"])
    assert [step["step"] for step in results["steps"]] == ["calibration", "general-campaign", "zoo-campaign"]
    assert all(step["exit_status"] in (0, 1) for step in results["steps"])
    assert len([path for path in (out / "campaigns").glob("*/summary.json") if not path.parent.is_symlink()]) == 2
    assert json.loads((out / "calibration.json").read_text())  # rows of measured tensors
    assert "float32:" in (out / "calibration.log").read_text()
