"""Several machines share one example database through a real Redis server (a `redis-server` on loopback)."""

import json
import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

import pytest
import redis

from tests.campaign_runs import FAULT, ROOT, campaign_command, run_campaign

# A small vocabulary with tanh makes finding the fault certain within the minute; a replay must
# draw from the same vocabulary (the database holds choice sequences, not networks).
_VOCABULARY = ("--fuzz-layers", "tanh,relu")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture(scope="module")
def redis_url():
    if shutil.which("redis-server") is None:
        if os.environ.get("CI"):
            pytest.fail("redis-server is not installed: `make setup` installs it (apt-get install redis-server)")
        pytest.skip("redis-server is not installed (make setup installs it)")
    port = _free_port()
    server = subprocess.Popen(
        ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
        stdout=subprocess.DEVNULL,
    )
    url = f"redis://127.0.0.1:{port}/0"
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                redis.Redis.from_url(url).ping()
                break
            except redis.ConnectionError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        yield url
    finally:
        server.terminate()
        server.wait(timeout=10)


@pytest.mark.slow
def test_two_concurrent_machines_share_and_replay_each_others_failures(redis_url, tmp_path):
    # Two "machines" (separate artifact and local directories, different seeds) run at once on one
    # Redis database; one has the faulty thunder and finds the fault (a small vocabulary with tanh
    # makes that certain within the minute), the other runs clean.
    machines = {name: tmp_path / name for name in ("faulty", "clean")}
    runs = {
        name: subprocess.Popen(
            campaign_command(
                path,
                "--hypothesis-profile",
                "nightly",
                "--fuzz-minutes",
                "1",
                "--fuzz-seed",
                str(seed),
                "--fuzz-database",
                redis_url,
                *_VOCABULARY,
            ),
            cwd=ROOT,
            env={**os.environ, "FUZZ_INJECT_FAULT": FAULT if name == "faulty" else ""},
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )  # fmt: skip
        for seed, (name, path) in enumerate(machines.items())
    }
    outputs = {name: run.communicate(timeout=600)[0] for name, run in runs.items()}
    assert runs["faulty"].returncode == 1, outputs["faulty"][-3000:]
    assert runs["clean"].returncode == 0, outputs["clean"][-3000:]
    # A third machine, with nothing local, replays the shared database: the failure at once.
    start = time.monotonic()
    replay = run_campaign(
        tmp_path / "third", "--hypothesis-profile", "replay", "--fuzz-database", redis_url, *_VOCABULARY
    )
    seconds = time.monotonic() - start
    assert replay.returncode == 1 and "GradientDivergence" in replay.stdout, replay.stdout[-3000:]
    summary = json.loads((tmp_path / "third" / "artifacts" / "latest" / "summary.json").read_text())
    assert summary["failures"] and summary["failures"][0]["class"] == "gradient-divergence"
    print(f"replay from Redis re-failed in {seconds:.1f} s ({summary['examples']} examples run)")
    # ... and once thunder is fixed (no fault), the same replay passes.
    # The same vocabulary as the runs that saved it: another one would decode the saved choices into other networks.
    fixed = run_campaign(
        tmp_path / "fourth", "--hypothesis-profile", "replay", "--fuzz-database", redis_url, *_VOCABULARY, fault=None
    )
    assert fixed.returncode == 0, fixed.stdout[-3000:]
    fixed_summary = json.loads((tmp_path / "fourth" / "artifacts" / "latest" / "summary.json").read_text())
    assert fixed_summary["examples"] >= summary["examples"] > 0  # it did replay the saved failure


def test_an_empty_shared_database_replays_nothing(redis_url, tmp_path):
    url = redis_url.rsplit("/", 1)[0] + "/5"  # another logical database on the same server
    run = run_campaign(Path(tmp_path), "--hypothesis-profile", "replay", "--fuzz-database", url)
    assert run.returncode == 0, run.stdout[-3000:]
