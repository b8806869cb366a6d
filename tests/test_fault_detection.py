"""The harness is proven by what it catches: inject a fault into thunder, run the real campaign, check the shrunk repro.

The fault (tests/faults.py) doubles the gradient of tanh only where thunder's checkpoint converter
substitutes it, i.e. only inside checkpointed functions. The campaign runs as users run it: pytest
on fuzz/ with our conftest, a real Hypothesis database and the artifacts directory.
"""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fuzz.spec import CheckpointSpec, LayerSpec, NetSpec

ROOT = Path(__file__).resolve().parent.parent
FAULT = "tanh-grad-x2"
MINIMAL = NetSpec(features=1, layers=[LayerSpec("tanh")], checkpoints=[CheckpointSpec(0, 1)])


_CAMPAIGN = "fuzz/test_ckpt_grad_parity.py -p tests.faults -p no:logging -p no:xdist --fuzz-device cpu --fuzz-shards 1"
# The first vocabulary in float32/float64: the self-test then does not depend on which real thunder
# bugs (or low-precision tolerance questions) the rest of the space exposes.
_LAYERS = "linear,relu,tanh,sigmoid,gelu,silu,softplus,layer_norm,mlp,residual"
_DTYPES = "float32,float64"


def _campaign_command(tmp: Path, *extra: str) -> list[str]:
    paths = ["--fuzz-artifacts", str(tmp / "artifacts"), "--fuzz-database", str(tmp / "db")]
    return [
        sys.executable,
        "-m",
        "pytest",
        *_CAMPAIGN.split(),
        "--fuzz-layers",
        _LAYERS,
        "--fuzz-dtypes",
        _DTYPES,
        *paths,
        *extra,
    ]


def _campaign(tmp: Path, *extra: str, fault: str | None = FAULT) -> subprocess.CompletedProcess:
    env = {**os.environ, "FUZZ_INJECT_FAULT": fault or ""}
    return subprocess.run(
        _campaign_command(tmp, *extra), cwd=ROOT, env=env, capture_output=True, text=True, timeout=900
    )


def _run_repro(repro: Path, fault: str | None) -> subprocess.CompletedProcess:
    inject = f"from tests.faults import install; install({fault!r}); " if fault else ""
    code = f"import runpy; {inject}runpy.run_path({str(repro)!r}, run_name='__main__')"
    # Run from a directory outside the project: the repro must not need this package.
    env = {**os.environ, "PYTHONPATH": str(ROOT) if fault else ""}
    return subprocess.run(
        [sys.executable, "-c", code], cwd=repro.parent, env=env, capture_output=True, text=True, timeout=300
    )


@pytest.fixture(scope="module")
def faulty_campaign(tmp_path_factory) -> tuple[subprocess.CompletedProcess, Path]:
    tmp = tmp_path_factory.mktemp("faulty")
    run = _campaign(tmp, "--hypothesis-profile", "nightly", "--fuzz-minutes", "4")
    return run, tmp / "artifacts"


def test_the_campaign_fails_on_the_injected_fault(faulty_campaign):
    run, artifacts = faulty_campaign
    assert run.returncode == 1, run.stdout[-3000:] + run.stderr[-3000:]
    assert "GradientDivergence" in run.stdout and "repro.py:" in run.stdout


def test_the_failure_shrinks_to_that_one_layer_in_one_checkpoint(faulty_campaign):
    run, artifacts = faulty_campaign
    summary = json.loads((artifacts / "summary.json").read_text())
    (failure,) = summary["failures"]
    assert failure["class"] == "gradient-divergence"
    spec = NetSpec.from_json((artifacts / failure["id"] / "spec.json").read_text())
    assert spec == MINIMAL
    assert not list(artifacts.glob("unshrunk/*")), "the shrunk repro replaces the one written at first sight"
    detect_s, shrunk_s = summary["first_failure"]["after_s"], failure["shrunk_after_s"]
    print(
        f"detected after {detect_s} s (example {summary['first_failure']['example']}); "
        f"shrunk after {shrunk_s} s ({shrunk_s - detect_s:.1f} s of shrinking, "
        f"{failure['after_examples']} calls in all)"
    )
    assert shrunk_s < 240


def test_the_repro_exits_1_with_the_fault_and_0_without(faulty_campaign):
    run, artifacts = faulty_campaign
    (repro,) = artifacts.glob("gradient-divergence-*/repro.py")
    assert "import fuzz" not in repro.read_text() and "from fuzz" not in repro.read_text()
    with_fault = _run_repro(repro, FAULT)
    assert with_fault.returncode == 1, with_fault.stdout + with_fault.stderr[-3000:]
    assert "REPRODUCED" in with_fault.stdout and "grad of input" in with_fault.stdout
    without = _run_repro(repro, None)
    assert without.returncode == 0, without.stdout + without.stderr[-3000:]
    assert "NOT REPRODUCED" in without.stdout


def test_the_saved_failure_replays_from_the_database(faulty_campaign, tmp_path):
    run, artifacts = faulty_campaign
    replay = _campaign(artifacts.parent, "--hypothesis-profile", "replay")
    assert replay.returncode == 1 and "GradientDivergence" in replay.stdout
    clean = _campaign(artifacts.parent, "--hypothesis-profile", "replay", fault=None)
    assert clean.returncode == 0, clean.stdout[-3000:]


def test_an_interrupted_campaign_keeps_the_failure_it_had_found(tmp_path):
    env = {**os.environ, "FUZZ_INJECT_FAULT": FAULT}
    command = _campaign_command(tmp_path, "--hypothesis-profile", "nightly", "--fuzz-minutes", "4")
    campaign = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 240
        while not list((tmp_path / "artifacts").glob("unshrunk/*/repro.py")) and time.monotonic() < deadline:
            assert campaign.poll() is None, "the campaign ended before it found the fault"
            time.sleep(0.2)
        # The artifact is written inside the failing call, the database entry just after it returns.
        time.sleep(3)
        campaign.send_signal(signal.SIGINT)  # while Hypothesis is still looking for more bugs / shrinking
        campaign.wait(timeout=120)
    finally:
        campaign.kill()
    # Depending on where the signal lands, the repro is still the unshrunk one or already the final one.
    repros = list((tmp_path / "artifacts").glob("**/gradient-divergence-*/repro.py"))
    assert repros, sorted(str(p) for p in tmp_path.rglob("*"))
    assert all(_run_repro(repro, FAULT).returncode == 1 for repro in repros)
    assert list((tmp_path / "db").rglob("*")), "the failing example is in the database too"
