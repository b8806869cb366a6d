"""Resident memory of one process over a long run of the campaign's per-example path.

    .venv/bin/python -m tools.memory_growth [--examples 500] [--every 50] [--out memory.json]

Runs ``--examples`` networks of the whole vocabulary and every dtype through `Campaign.run_example`
(as `tools/benchmark.py` does; known issues excluded) and prints the resident set size every
``--every`` networks and its growth from the first sample on. Anything kept alive across
examples (compiled functions, dynamo's caches, modules, tensors) shows up as steady growth.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

from fuzz.campaign.config import CampaignConfig
from fuzz.campaign.engine import Campaign
from fuzz.fix import use_converter
from tools.benchmark import harness_pass


def resident_mb() -> float:
    """This process's resident set size in MB (Linux)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS in /proc/self/status: this tool needs Linux")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=500)
    parser.add_argument("--every", type=int, default=50)
    parser.add_argument("--out", type=Path, help="also write the samples as JSON here")
    args = parser.parse_args(argv)
    if args.examples < 1 or args.every < 1:
        parser.error("--examples and --every must be at least 1")
    samples: list[tuple[int, float]] = []

    def sample(ran: int) -> None:
        if ran == 1 or ran % args.every == 0:
            samples.append((ran, resident_mb()))
            print(f"after {ran:>5} networks: {samples[-1][1]:8.1f} MB ({samples[-1][1] - samples[0][1]:+.1f} MB)")

    with use_converter("fixed"), tempfile.TemporaryDirectory() as artifacts:
        campaign = Campaign(CampaignConfig(run_dir=Path(artifacts), known_issues="xfail"))
        seconds, _ = harness_pass(campaign, args.examples, sample)
    growth = samples[-1][1] - samples[0][1]
    print(f"{args.examples} networks in {seconds:.0f} s: resident memory grew {growth:+.1f} MB after the first network")
    if args.out:
        args.out.write_text(json.dumps({"samples": samples, "growth_mb": growth, "seconds": seconds}) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
