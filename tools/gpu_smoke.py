"""The first run on a CUDA machine, in one go (`make gpu-smoke`): everything it learns goes to one folder.

    python tools/gpu_smoke.py [--out gpu-smoke] [--minutes 2] [--zoo-minutes M] [--workers-per-gpu 2] [--examples 20]

1. the versions found (python, torch, CUDA, GPUs, thunder, transformers);
2. thunder's test_checkpointing_thunderfx network on CUDA with each converter (fixed, stock): verdict, largest
   relative error of thunderfx and of eager against the float64 reference, seconds;
3. the tolerance calibration tool on CUDA (OUT/calibration.json, its table in OUT/calibration.log);
4. a short general-family campaign and a short model-zoo campaign with ``--converter both`` (-n auto: workers
   pinned to GPUs), each a run folder under OUT/campaigns.

OUT/results.json is rewritten after each step, so a smoke stopped by a lease's time limit keeps what it learned;
the steps bounded by examples come before the campaigns, which are bounded by minutes.

Installing what is missing is the Makefile's job (`make gpu-smoke` runs `pip install -e .` against the torch the
machine has). Exit status: 0 when every step ran (whatever the verdicts), 1 when a step could not run, 2 without
CUDA (unless --device cpu, which rehearses the same steps on CPU).
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import time
from pathlib import Path

from fuzz.campaign.families import GENERAL, PROGRAM, TRAINING, ZOO

ROOT = Path(__file__).resolve().parent.parent


def _versions(device: str) -> dict:
    import thunder
    import torch
    import transformers

    gpus = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())] if device == "cuda" else []
    return {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "gpus": gpus,
        "thunder": thunder.__version__,
        "transformers": transformers.__version__,
    }


def _seed_network(device: str) -> list[dict]:
    from fuzz.generate.decoder import checkpointing_thunderfx_spec
    from fuzz.judge.verdict import check_spec

    rows = []
    for converter in ("fixed", "stock"):
        start = time.perf_counter()
        outcome = check_spec(checkpointing_thunderfx_spec(device), converter=converter)
        rows.append({
            "converter": converter,
            "verdict": "pass" if outcome.failure is None else outcome.failure.failure_class,
            "message": None if outcome.failure is None else str(outcome.failure).splitlines()[0],
            "thunder_relative_error": outcome.discrepancy,
            "eager_relative_error": outcome.eager_error,
            "compiled_every_checkpoint": outcome.compiled,
            "seconds": round(time.perf_counter() - start, 1),
        })  # fmt: skip
    return rows


def _step(name: str, command: list[str], out: Path) -> dict:
    """Run ``command`` from the checkout, its output to OUT/<name>.log; what it returned and how long it took."""
    start = time.perf_counter()
    with (out / f"{name}.log").open("w") as log:
        code = subprocess.run(command, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT).returncode
    return {"step": name, "command": command, "exit_status": code, "seconds": round(time.perf_counter() - start, 1)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("gpu-smoke"), help="the folder of everything (gpu-smoke)")
    parser.add_argument("--minutes", type=float, default=2.0, help="budget of the general campaign (2)")
    parser.add_argument("--zoo-minutes", type=float, help="budget of the model-zoo campaign (default: --minutes)")
    parser.add_argument("--workers-per-gpu", type=int, default=2, help="campaign workers on each GPU (2)")
    parser.add_argument("--examples", type=int, default=20, help="calibration examples per dtype (20)")
    parser.add_argument("--device", default="cuda", choices=("cuda", "cpu"), help="cpu: rehearse on CPU (cuda)")
    args = parser.parse_args(argv)
    import torch

    if args.device == "cuda" and not torch.cuda.is_available():
        print("gpu-smoke: no CUDA device here; run it on a GPU machine (or --device cpu to rehearse)", file=sys.stderr)
        return 2
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    results: dict = {"versions": _versions(args.device), "device": args.device}
    (out / "results.json").write_text(json.dumps(results, indent=2))
    results["seed_network"] = _seed_network(args.device)
    (out / "results.json").write_text(json.dumps(results, indent=2))
    calibrate = [sys.executable, "tools/calibrate_tolerances.py", "--examples", str(args.examples)]
    calibrate += ["--device", args.device, "--out", str(out / "calibration.json")]
    campaign = [sys.executable, "-m", "fuzz.cli", "run", "-n", "auto", "--device", args.device]
    campaign += ["--converter", "both", "--artifacts", str(out / "campaigns")]
    campaign += [f"--fuzz-workers-per-gpu={args.workers_per_gpu}"]
    general = [
        "--minutes",
        str(args.minutes),
        "--fuzz-families",
        ",".join(f.name for f in (GENERAL, PROGRAM, TRAINING)),
    ]
    zoo = [
        "--minutes",
        str(args.minutes if args.zoo_minutes is None else args.zoo_minutes),
        "--fuzz-families",
        ZOO.name,
    ]
    results["steps"] = []
    for name, command in (
        ("calibration", calibrate),
        ("general-campaign", [*campaign, *general]),
        ("zoo-campaign", [*campaign, *zoo]),
    ):
        results["steps"].append(_step(name, command, out))
        (out / "results.json").write_text(json.dumps(results, indent=2))
    for row in results["seed_network"]:
        error = f"thunder error {row['thunder_relative_error']} (eager {row['eager_relative_error']})"
        print(f"seed network, converter {row['converter']}: {row['verdict']}, {error}, {row['seconds']} s")
    for step in results["steps"]:
        print(f"{step['step']}: exit status {step['exit_status']} in {step['seconds']} s ({out / step['step']}.log)")
    print(f"everything in {out}")
    # A campaign exits 1 when it found something: a finding, not a failed step.
    return 1 if any(step["exit_status"] not in (0, 1) for step in results["steps"]) else 0


if __name__ == "__main__":
    sys.exit(main())
