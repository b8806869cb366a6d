"""Real campaigns in a subprocess, as users run them, with an optional injected fault (tests/faults.py)."""

import os
import subprocess
import sys
from pathlib import Path

from fuzz.campaign.families import GENERAL

ROOT = Path(__file__).resolve().parent.parent
FAULT = "tanh-grad-x2"

_CAMPAIGN = "fuzz/test_ckpt_grad_parity.py -p tests.faults --fuzz-device cpu"
# The general family only (no decoders, programs, models or op sweep), unless a caller's own --fuzz-families (the
# last one wins) picks others.
_FAMILY = ["--fuzz-families", GENERAL.name]
# The first vocabulary in float32/float64: the self-test then does not depend on which real thunder
# bugs (or low-precision tolerance questions) the rest of the space exposes.
_LAYERS = "linear,relu,tanh,sigmoid,gelu,silu,softplus,layer_norm,mlp,residual"
_DTYPES = "float32,float64"


def campaign_command(tmp: Path, *extra: str, workers: int | str = 0, logging: bool = False) -> list[str]:
    """The campaign in one process and one shard, or on ``workers`` xdist workers (a count or "auto") and 4 shards.

    ``logging``: keep pytest's logging plugin (off by default: captured logs only slow a self-test).
    """
    paths = ["--fuzz-artifacts", str(tmp / "artifacts"), "--fuzz-database", str(tmp / "db")]
    processes = ["-p", "no:xdist", "--fuzz-shards", "1"] if not workers else ["-n", str(workers), "--fuzz-shards", "4"]
    return [
        sys.executable,
        "-m",
        "pytest",
        *_CAMPAIGN.split(),
        *(() if logging else ("-p", "no:logging")),
        *_FAMILY,
        *processes,
        "--fuzz-layers",
        _LAYERS,
        "--fuzz-dtypes",
        _DTYPES,
        *paths,
        *extra,
    ]


def fault_everywhere(fault: str) -> dict[str, str]:
    """The environment that injects ``fault`` into every Python process it starts (tests/fault_site): the
    campaign's and the fresh interpreter that confirms each failure by running its repro.py."""
    return {"FUZZ_INJECT_FAULT": fault, "PYTHONPATH": f"{ROOT / 'tests' / 'fault_site'}{os.pathsep}{ROOT}"}


def run_campaign(
    tmp: Path, *extra: str, fault: str | None = FAULT, workers: int | str = 0
) -> subprocess.CompletedProcess:
    """A campaign with ``fault`` in thunder (in every process it starts, see `fault_everywhere`)."""
    env = {**os.environ, **(fault_everywhere(fault) if fault else {}), "FUZZ_FAULT_MARKER": str(tmp / "fault-marker")}
    command = campaign_command(tmp, *extra, workers=workers)
    return subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)


def run_repro(repro: Path, fault: str | None) -> subprocess.CompletedProcess:
    inject = f"from tests.faults import install; install({fault!r}); " if fault else ""
    code = f"import runpy; {inject}runpy.run_path({str(repro)!r}, run_name='__main__')"
    # Run from a directory outside the project: the repro must not need this package.
    env = {**os.environ, "PYTHONPATH": str(ROOT) if fault else ""}
    return subprocess.run(
        [sys.executable, "-c", code], cwd=repro.parent, env=env, capture_output=True, text=True, timeout=300
    )
