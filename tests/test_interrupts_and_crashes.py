"""A campaign that is interrupted, or whose worker dies or hangs, keeps what it found and says so.

Real campaigns in a subprocess with a fault injected into thunder (tests/faults.py), as in
tests/test_fault_detection.py.
"""

import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest

from fuzz.spec import NetSpec
from tests.campaign_runs import FAULT, ROOT, campaign_command, run_campaign, run_repro


@pytest.mark.parametrize(
    "stop",
    [
        pytest.param(signal.SIGINT, marks=pytest.mark.slow),
        signal.SIGTERM,
        pytest.param(signal.SIGKILL, marks=pytest.mark.slow),
    ],
    ids=lambda s: s.name,
)
def test_an_interrupted_campaign_keeps_the_failure_it_had_found(tmp_path, stop):
    # SIGKILL stands for a crashed or killed worker: no handler runs, and still nothing found is lost.
    env = {**os.environ, "FUZZ_INJECT_FAULT": FAULT}
    command = campaign_command(
        tmp_path, "--hypothesis-profile", "nightly", "--fuzz-minutes", "4", "--fuzz-layers", "tanh,relu"
    )
    campaign = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 240
        while not list((tmp_path / "artifacts").glob("*/unshrunk/*/repro.py")) and time.monotonic() < deadline:
            assert campaign.poll() is None, "the campaign ended before it found the fault"
            time.sleep(0.2)
        # The artifact is written inside the failing call, the database entry just after it returns.
        time.sleep(3)
        campaign.send_signal(stop)  # while Hypothesis is still looking for more bugs / shrinking
        campaign.wait(timeout=120)
    finally:
        campaign.kill()
    # Depending on where the signal lands, the repro is still the unshrunk one or already the final one.
    repros = list((tmp_path / "artifacts").glob("**/gradient-divergence-*/repro.py"))
    assert repros, sorted(str(p) for p in tmp_path.rglob("*"))
    assert all(run_repro(repro, FAULT).returncode == 1 for repro in repros)
    assert list((tmp_path / "db").rglob("*")), "the failing example is in the database too"


@pytest.mark.slow
@pytest.mark.parametrize("fault", ["tanh-segfault-once", "tanh-hang-once"])
def test_a_dead_worker_is_reported_and_the_campaign_goes_on(tmp_path, fault):
    # The first tanh thunder sees kills its xdist worker (a segfault) or hangs it where the
    # per-example alarm cannot reach (then the hard limit, 2 x 15 + 10 s, ends the process). The
    # limit leaves room for a loaded machine: any example over it would fail its shard as a timeout
    # (and at 10 s, inductor's first compile of a fallback sometimes ran past it and its grace there).
    run = run_campaign(
        tmp_path,
        "--hypothesis-profile",
        "nightly",
        "--fuzz-minutes",
        "1",
        "--fuzz-timeout",
        "15",
        "--fuzz-layers",
        "tanh,relu,linear",
        fault=fault,
        workers=2,
    )
    assert run.returncode == 1, run.stdout[-3000:] + run.stderr[-3000:]
    assert "crashed while running" in run.stdout and "worker-crash" in run.stdout
    summary = json.loads((tmp_path / "artifacts" / "latest" / "summary.json").read_text())
    crashes = [f for f in summary["failures"] if f["class"] == "worker-crash"]
    assert len(crashes) == 1, summary["failures"]
    hung = "hard time limit" in crashes[0]["message"]
    assert hung == (fault == "tanh-hang-once"), crashes[0]["message"]
    spec = NetSpec.from_json((Path(crashes[0]["repro"]).parent / "spec.json").read_text())
    assert "tanh" in [layer.kind for layer in spec.layers]  # (thunder's splitter calls ops outside checkpoints too)
    # The other shards ran to their budget and the campaign's examples kept counting. On a loaded machine (seen at
    # load 3 on 2 cores) an example can run over the limit twice: a `timeout`, the harness working as designed, which
    # fails its shard too. Nothing else may fail.
    others = [f for f in summary["failures"] if f["class"] != "worker-crash"]
    assert all(f["class"] == "timeout" for f in others), others
    failed, passed = map(int, re.search(r"(\d+) failed, (\d+) passed", run.stdout).groups())
    assert failed + passed == 4 and 1 <= failed <= 1 + len(others), run.stdout[-2000:]
    assert summary["examples"] > 10
