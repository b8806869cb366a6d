"""Bad input gets one clear line naming what was wrong and what to do."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import fuzz.versions.compat
from fuzz.campaign.families import GENERAL, ZOO
from fuzz.generate.spec import CheckpointSpec, LayerSpec, NetSpec
from fuzz.registry.known_issues import KNOWN_ISSUES
from tests.campaign_runs import fault_everywhere

ROOT = Path(__file__).resolve().parents[2]


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
        (["--fuzz-families", "general,toy"], "--fuzz-families: unknown toy; choose from sweep, general, program"),
        (
            ["--fuzz-families", "nested", "--hypothesis-profile", "ci"],
            "--fuzz-families nested: none runs under profile ci (nested: profiles nightly, --fuzz-minutes 60 or more)",
        ),
        (
            ["--fuzz-families", "program", "--fuzz-structure", "program update of an inptu"],
            "--fuzz-structure 'program update of an inptu': not a program's flow label (the summary's coverage lists "
            "them); nearest: 'program update of an input'",
        ),
        (
            ["--fuzz-structure", "program update of an input"],
            "--fuzz-structure 'program update of an input': only programs show flow labels; add --fuzz-families "
            "program",
        ),
        (["--fuzz-run-id", "latest"], "--fuzz-run-id 'latest': a run id is one folder name"),
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
    monkeypatch.setattr(fuzz.versions.compat, "version", versions.__getitem__)
    reason = fuzz.versions.compat.incompatibility()
    assert reason is None if expected is None else expected in reason


CKPT_FUZZ = [sys.executable, "-m", "fuzz.cli"]  # what the `ckpt-fuzz` console script runs
MINIMAL_TANH = NetSpec(features=1, layers=[LayerSpec("tanh")], checkpoints=[CheckpointSpec(0, 1)])


def _ckpt_fuzz(*args: str, cwd: Path = ROOT, fault: str | None = None, timeout: float = 600):
    env = {**os.environ, **(fault_everywhere(fault) if fault else {})}
    return subprocess.run([*CKPT_FUZZ, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


def test_the_spec_and_the_command_line_import_no_torch():
    # A spec is plain data; `ckpt-fuzz --help` and `report` answer at once (torch and thunder take seconds to import).
    code = (
        "import sys, fuzz.generate.spec, fuzz.generate.layers, fuzz.cli, fuzz.report.html; "
        "assert 'torch' not in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True, timeout=60)
    for command in ("run", "check", "replay", "report", "known-issues"):
        run = _ckpt_fuzz(command, "--help", timeout=60)
        assert run.returncode == 0 and f"usage: ckpt-fuzz {command}" in run.stdout, run.stderr


@pytest.mark.parametrize(
    ("fault", "status", "verdict"),
    [(None, 0, "PASS: thunderfx matches"), ("tanh-grad-x2", 1, "FAIL: gradient-divergence [checkpoint-specific]")],
)
def test_check_gives_the_verdict_with_the_exit_code_of_a_repro(tmp_path, fault, status, verdict):
    (tmp_path / "spec.json").write_text(MINIMAL_TANH.to_json())
    run = _ckpt_fuzz("check", str(tmp_path), "--device", "cpu", fault=fault)
    assert run.returncode == status and run.stdout.startswith(verdict), run.stdout + run.stderr[-3000:]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["check", "missing.json"], "ckpt-fuzz check: cannot read a spec from missing.json"),
        (["check", "pyproject.toml"], "spec is not valid JSON"),
        (["report", "--artifacts", "nowhere"], "ckpt-fuzz report: no run folder with a summary.json at nowhere/latest"),
        (["replay", "20990101-000000-x", "--artifacts", "nowhere"], "no run under nowhere"),
    ],
)
def test_a_command_that_cannot_run_says_why_in_one_line_and_exits_2(args, message):
    run = _ckpt_fuzz(*args, timeout=120)
    assert run.returncode == 2 and message in run.stderr and len(run.stderr.strip().splitlines()) == 1, run.stderr


def test_run_then_replay_then_report_each_run_in_its_own_folder(tmp_path):
    focus = ["--fuzz-layers", "tanh,relu", "--fuzz-dtypes", "float32", "--fuzz-shards", "1", "--fuzz-progress", "0"]
    focus += ["--seed", "0"]  # a fixed draw: seeds 1 and 3 meet memory failures of thunder 0.2.6 within it
    # The general family only: --fuzz-layers focuses it; programs and training steps draw their own layers (on thunder
    # 0.2.6 they meet unregistered forms of known bugs, and this run went red on the seeds that drew them).
    family = ["--fuzz-families", GENERAL.name]
    paths = ["--artifacts", str(tmp_path / "runs"), "--fuzz-database", str(tmp_path / "db")]
    # Bounded by examples (the dev profile's 25), not by seconds: a loaded machine makes it slower, never empty. The
    # budget is only a ceiling (measured: about 40 s idle; a 0.35-minute budget left nothing to replay under load).
    command = ("run", "--profile", "dev", "--minutes", "15", "-n", "0", "--device", "cpu")
    run = _ckpt_fuzz(*command, *paths, *focus, *family, cwd=tmp_path)
    assert run.returncode == 0 and "result: passed: nothing failed" in run.stdout, run.stdout[-3000:]
    (first,) = [path for path in (tmp_path / "runs").iterdir() if path.name != "latest"]
    summary = json.loads((first / "summary.json").read_text())
    assert summary["examples"] >= 10, summary["examples"]  # the profile's examples (18 of 25 are new), not the clock's
    assert summary["command"].startswith("ckpt-fuzz run --profile dev") and summary["run_id"] == first.name
    assert (first / "report.html").is_file() and f"report: {first / 'report.html'}" in run.stdout
    before = {path: path.read_bytes() for path in first.rglob("*") if path.is_file()}
    replay = _ckpt_fuzz("replay", "--artifacts", str(tmp_path / "runs"), *family, cwd=tmp_path)
    assert replay.returncode == 0, replay.stdout[-3000:]
    replayed = json.loads((tmp_path / "runs" / "latest" / "summary.json").read_text())
    assert replayed["profile"] == "replay" and replayed["run_id"] != first.name
    assert replayed["examples"] >= 1, "it replayed what the run saved in its database"
    assert {path: path.read_bytes() for path in first.rglob("*") if path.is_file()} == before, "the run is untouched"
    (first / "report.html").unlink()
    report = _ckpt_fuzz("report", first.name, "--artifacts", str(tmp_path / "runs"), timeout=120)
    assert report.returncode == 0 and report.stdout.strip() == str(first / "report.html"), report.stderr
    assert (first / "report.html").is_file()


@pytest.mark.slow
def test_known_issues_retests_every_registry_entry(tmp_path):
    # The slow entries hit the short time limit, which is one of their registered failure classes; 30 s leaves the
    # slowest of the others (max(dim) ties, attention under autocast: 10-20 s alone) room on a loaded machine.
    run = _ckpt_fuzz("known-issues", "--timeout", "30", "--device", "cpu", "--artifacts", str(tmp_path))
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    checks = json.loads((tmp_path / "latest" / "summary.json").read_text())["known_issue_checks"]
    assert checks == {issue.id: "reproduces" for issue in KNOWN_ISSUES}
    assert "re-tested: reproduces" in run.stdout


def test_every_add_of_known_issues_record_is_kept():
    from fuzz.cli import _parser

    args = _parser().parse_args(["known-issues", "--record", "x", "--add", "a", "--add", "b", "c"])
    assert args.add == ["a", "b", "c"]  # a second --add used to replace the first


def test_a_campaign_deselects_the_registry_retests_unless_it_checks_them():
    """The registry's re-tests are one "deselected" count in a campaign, not a skipped line per entry."""
    from fuzz.generate.architectures import ARCHITECTURES
    from fuzz.registry.known_issues import KNOWN_ISSUES

    def collected(*extra: str) -> str:
        command = [sys.executable, "-m", "pytest", "fuzz/test_ckpt_grad_parity.py", "--collect-only", "-q", *extra]
        return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=120).stdout

    # (with the nested slice's 8 shards, which a dev campaign leaves out)
    nested = 8
    listing = collected("--fuzz-device", "cpu")
    assert f"({len(KNOWN_ISSUES) + nested} deselected)" in listing
    # Shard by shard, each model-zoo architecture i in round i // 2 (bert, the 7th, before every family's shard 4).
    order = [line.split("::")[1] for line in listing.splitlines() if "::" in line]
    assert order.index(f"{ZOO.test}[{list(ARCHITECTURES)[-1]}]") < order.index(f"{GENERAL.test}[shard4]")
    assert order.index(f"{GENERAL.test}[shard0]") < order.index(f"{GENERAL.test}[shard1]")
    assert f"({nested} deselected)" in collected("--fuzz-device", "cpu", "--known-issues", "check")
