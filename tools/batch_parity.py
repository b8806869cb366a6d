"""Batched judging (`fuzz.judge.batch`) against judging alone, on the same networks: throughput and verdicts.

    .venv/bin/python -m tools.batch_parity [--examples 48] [--batch 4] [--runs 2] [--seed 0]

Draws a fixed set of the general family's networks (derandomized from ``--seed``, as a campaign's shard draws them)
and judges them, in alternating order over ``--runs`` rounds, (a) each alone (`check_spec`, the campaign's path with
``--fuzz-batch 1``) and (b) ``--batch`` at a time where they can be (those a known issue matches, random ones and
training steps alone, as the campaign does), a member not judged in its batch then alone. Prints examples per
second of each (median over the rounds), their ratio, and every network whose verdict differs between the two.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st

from fuzz.campaign.config import CampaignConfig
from fuzz.campaign.engine import Campaign
from fuzz.campaign.families import GENERAL
from fuzz.fix import use_converter
from fuzz.generate.spec import NetSpec
from fuzz.judge.batch import batchable, judged_in_batch
from fuzz.judge.limits import DEFAULT_TIMEOUT_S
from fuzz.judge.outcome import Outcome
from fuzz.judge.verdict import check_spec
from fuzz.registry.known_issues import known_issues_for


def drawn(examples: int, generation_seed: int, artifacts: Path) -> list[NetSpec]:
    """``examples`` distinct networks of the general family, the same on every machine for one seed."""
    campaign, specs = Campaign(CampaignConfig(run_dir=artifacts)), []

    @seed(generation_seed)
    @settings(
        database=None,
        max_examples=4 * examples,
        phases=(Phase.generate,),
        deadline=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(data=st.data())
    def draw(data: st.DataObject) -> None:
        spec = data.draw(campaign.strategy(GENERAL), label="spec")
        if len(specs) < examples and spec not in specs:
            specs.append(spec)

    draw()
    return specs


def verdict(outcome: Outcome) -> str:
    """What a campaign would conclude: invalid (why), a failure's class and signature, or a pass."""
    if not outcome.valid:
        return f"invalid: {outcome.invalid_reason}"
    return "pass" if outcome.failure is None else f"{outcome.failure.failure_class}: {outcome.failure.signature}"


def alone(specs: list[NetSpec]) -> list[str]:
    return [verdict(check_spec(spec, timeout_s=DEFAULT_TIMEOUT_S)) for spec in specs]


def batched(specs: list[NetSpec], size: int) -> list[str]:
    verdicts: dict[int, str] = {}
    joinable = [i for i, spec in enumerate(specs) if batchable(spec) and not known_issues_for(spec)]
    for start in range(0, len(joinable), size):
        members = joinable[start : start + size]
        outcomes = (
            judged_in_batch([specs[i] for i in members], "fixed", DEFAULT_TIMEOUT_S) if len(members) > 1 else [None]
        )
        verdicts.update((i, verdict(outcome)) for i, outcome in zip(members, outcomes, strict=True) if outcome)
    return [verdicts.get(i) or verdict(check_spec(spec, timeout_s=DEFAULT_TIMEOUT_S)) for i, spec in enumerate(specs)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=48, help="networks (default 48)")
    parser.add_argument("--batch", type=int, default=4, help="networks per batch (default 4)")
    parser.add_argument("--runs", type=int, default=2, help="rounds of both, alternating their order (default 2)")
    parser.add_argument("--seed", type=int, default=0, help="generation seed (default 0)")
    args = parser.parse_args(argv)
    if args.examples < 1 or args.batch < 2 or args.runs < 1:
        parser.error("--examples and --runs must be at least 1, --batch at least 2")
    with use_converter("fixed"), tempfile.TemporaryDirectory() as artifacts:
        specs = drawn(args.examples, args.seed, Path(artifacts))
        passes = {"alone": lambda: alone(specs), "batched": lambda: batched(specs, args.batch)}
        seconds: dict[str, list[float]] = {"alone": [], "batched": []}
        verdicts: dict[str, list[str]] = {}
        for run in range(args.runs):
            for name in ("alone", "batched") if run % 2 == 0 else ("batched", "alone"):
                start = time.perf_counter()
                verdicts[name] = passes[name]()
                seconds[name].append(time.perf_counter() - start)
    rate = {name: len(specs) / statistics.median(times) for name, times in seconds.items()}
    print(f"{len(specs)} networks, batches of {args.batch}, {args.runs} rounds (seconds: {seconds})")
    ratio = rate["batched"] / rate["alone"]
    print(f"examples/s alone {rate['alone']:.3f}, batched {rate['batched']:.3f}: {ratio:.2f}x")
    pairs = enumerate(zip(verdicts["alone"], verdicts["batched"], strict=True))
    differing = [(i, a, b) for i, (a, b) in pairs if a != b]
    print(f"verdicts: {sum(v == 'pass' for v in verdicts['alone'])} pass alone, {len(differing)} differ")
    for i, a, b in differing:
        print(f"  network {i}: alone {a!r}, batched {b!r}\n    {specs[i].to_json()}")
    return 1 if differing else 0


if __name__ == "__main__":
    sys.exit(main())
