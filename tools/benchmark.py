"""What the harness costs beside thunderfx itself, on a fixed set of networks.

    .venv/bin/python -m tools.benchmark [--examples 12] [--runs 5] [--dtypes float32,bfloat16] [--out bench.json]

Per dtype, draws a fixed set of networks (derandomized, so every run and every machine gets the
same ones; no random layers, whose oracle needs a second compile by design, and no known
issues) and times, in each run:

- **harness**: the campaign's whole per-example path (`Campaign.run_example` inside a Hypothesis
  test: generation, eager run, float64 reference, thunderfx run, oracle, bookkeeping);
- **bare**: on the same networks, what a user would write by hand: reset dynamo, `thunderfx(net)`,
  forward, backward.

Both use the fixed converter. The two passes alternate their order from run to run (inductor's
and thunder's caches favour whichever comes second), a first warm-up run is discarded, and the
ratio printed is the median of the per-run ratios. The float64 reference and the eager run are
also timed alone, to say what they add.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import torch
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from fuzz.campaign.config import CampaignConfig
from fuzz.campaign.engine import Campaign
from fuzz.campaign.families import GENERAL
from fuzz.fix import use_converter
from fuzz.generate.layers import LAYER_KINDS
from fuzz.generate.spec import DTYPES, NetSpec
from fuzz.model_builder import build_example
from fuzz.registry.known_issues import known_issues_for
from fuzz.run.passes import fresh_input
from fuzz.run.runner import run_eager, run_reference

_DETERMINISTIC_KINDS = tuple(name for name, kind in LAYER_KINDS.items() if not kind.random)


def fixed_draws(examples: int) -> settings:
    """Hypothesis settings that draw the same ``examples`` networks on every run and machine: derandomized, no
    database, generation only, no deadline or health check."""
    return settings(
        derandomize=True,
        database=None,
        max_examples=examples,
        phases=(Phase.generate,),
        deadline=None,
        suppress_health_check=list(HealthCheck),
    )


def harness_pass(
    campaign: Campaign, examples: int, after_each: Callable[[int], None] = lambda ran: None
) -> tuple[float, list[NetSpec]]:
    """Seconds the campaign's per-example path takes for ``examples`` networks, and those networks.

    ``after_each`` is called with the number of networks run so far after each one.
    """
    ran: list[NetSpec] = []

    @fixed_draws(examples)
    @given(data=st.data())
    def one_example(data: st.DataObject) -> None:
        # No network a known issue matches: the stripped network its failure is checked against is a second compile
        # by design (as a new failure's triage is), not the per-example cost measured here.
        spec = data.draw(campaign.strategy(GENERAL).filter(lambda spec: not known_issues_for(spec)), label="spec")
        campaign.run_example(spec)  # a failure is counted (and triaged), not raised
        ran.append(spec)
        after_each(len(ran))

    campaign.start_item()  # a fresh shard: nothing remembered from the last pass
    start = time.perf_counter()
    one_example()
    return time.perf_counter() - start, ran


def bare_pass(specs: list[NetSpec]) -> float:
    """Seconds of hand-written thunderfx compile + forward + backward over ``specs`` (building excluded)."""
    from thunder.dynamo import thunderfx

    total = 0.0
    for spec in specs:
        example = build_example(spec)
        x = fresh_input(example.input)
        start = time.perf_counter()
        try:
            torch._dynamo.reset()
            thunderfx(example.net)(x).backward(example.cotangent)
        except Exception:  # a thunder crash costs what it costs; the harness pass meets it too
            pass
        total += time.perf_counter() - start
    return total


def _median_seconds(function, specs: list[NetSpec]) -> float:
    """Median over ``specs`` of the seconds ``function(build_example(spec))`` takes."""
    times = []
    for spec in specs:
        example = build_example(spec)
        start = time.perf_counter()
        function(example)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def benchmark(dtype: str, examples: int, runs: int, artifacts: Path) -> dict:
    config = CampaignConfig(run_dir=artifacts, kinds=_DETERMINISTIC_KINDS, dtypes=(dtype,), known_issues="xfail")
    campaign = Campaign(config)
    _, drawn = harness_pass(campaign, examples)  # warm-up, discarded
    # Hypothesis may draw a network twice; the harness answers the repeat from memory, so the bare
    # loop runs each distinct network once (harness time still counts every draw).
    specs = list({spec.to_json(): spec for spec in drawn}.values())
    bare_pass(specs)
    bare_s, harness_s = [], []
    for run in range(runs):
        if run % 2:
            bare_s.append(bare_pass(specs))
            harness_s.append(harness_pass(campaign, examples)[0])
        else:
            harness_s.append(harness_pass(campaign, examples)[0])
            bare_s.append(bare_pass(specs))
    ratios = [h / b for h, b in zip(harness_s, bare_s, strict=True)]  # both over the same distinct networks
    return {
        "dtype": dtype,
        "examples": len(specs),
        "drawn": len(drawn),
        "runs": runs,
        "bare_s_per_example": statistics.median(bare_s) / len(specs),
        "harness_s_per_example": statistics.median(harness_s) / len(specs),  # per distinct network
        "ratio_median": statistics.median(ratios),
        "ratio_min": min(ratios),
        "ratio_max": max(ratios),
        "eager_ms_median": 1e3 * _median_seconds(run_eager, specs),
        "float64_reference_ms_median": 1e3 * _median_seconds(run_reference, specs),
        "failing_examples": sum(campaign.stats.failing_examples.values()),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=12, help="networks per dtype (default 12)")
    parser.add_argument("--runs", type=int, default=5, help="timed runs after the warm-up (default 5)")
    parser.add_argument("--dtypes", default="float32,bfloat16", help="comma-separated, among " + ",".join(DTYPES))
    parser.add_argument("--out", type=Path, help="also write the results as JSON here")
    args = parser.parse_args(argv)
    dtypes = [d.strip() for d in args.dtypes.split(",") if d.strip()]
    if unknown := [d for d in dtypes if d not in DTYPES]:
        parser.error(f"--dtypes: unknown {', '.join(unknown)}; choose from {', '.join(DTYPES)}")
    if args.examples < 1 or args.runs < 1:
        parser.error("--examples and --runs must be at least 1")
    rows = []
    with use_converter("fixed"), tempfile.TemporaryDirectory() as artifacts:
        for dtype in dtypes:
            rows.append(benchmark(dtype, args.examples, args.runs, Path(artifacts)))
    print(
        f"{'dtype':<10}{'nets':>5}{'drawn':>6}{'bare s/ex':>11}{'harness s/ex':>14}{'ratio':>7}  [min..max]  "
        f"{'eager ms':>9}{'f64 ref ms':>11}"
    )
    for r in rows:
        print(
            f"{r['dtype']:<10}{r['examples']:>5}{r['drawn']:>6}{r['bare_s_per_example']:>11.3f}{r['harness_s_per_example']:>14.3f}"
            f"{r['ratio_median']:>7.3f}  [{r['ratio_min']:.3f}..{r['ratio_max']:.3f}]"
            f"{r['eager_ms_median']:>9.1f}{r['float64_reference_ms_median']:>11.1f}"
        )
    print(
        f"seconds per example and ratio (harness / bare): medians over {args.runs} runs after a warm-up; "
        "eager and float64 reference: median over the networks"
    )
    if args.out:
        args.out.write_text(json.dumps(rows, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
