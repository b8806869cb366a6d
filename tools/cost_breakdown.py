"""Where one example's time goes, per family: the numbers docs/performance.md's cost breakdown is made of.

    .venv/bin/python -m tools.cost_breakdown [--examples 4] [--families general,program,decoder,zoo,training]

Per family, a fixed set of networks (derandomized draws, no network a known issue matches) goes through the
campaign's whole per-example path (`Campaign.run_example` inside a Hypothesis test, as in a campaign), with the
phases the harness marks (`fuzz.run.runner.in_phase`: eager, the float64 reference, the nudged runs, thunder) timed
by a listener; the rest of the path (drawing, building, judging, bookkeeping) is what the total leaves. The thunder
phase is then split into compile and run by running each network's thunderfx twice more, alone: its first call
(compile and run) and its second (run only). Prints seconds per example, medians over the family's networks.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import torch
from hypothesis import given
from hypothesis import strategies as st

from fuzz.campaign.config import CampaignConfig
from fuzz.campaign.engine import Campaign
from fuzz.campaign.families import DRAWN_FAMILIES, NESTED_SLICE
from fuzz.fix import use_converter
from fuzz.generate.spec import NetSpec
from fuzz.model_builder import build_example
from fuzz.registry.known_issues import known_issues_for
from fuzz.run.passes import forward_backward, fresh_input
from fuzz.run.runner import on_phase_change
from tools.benchmark import fixed_draws

# The families drawn from a strategy (the op sweep's cases are listed, and nested networks are the general family's).
FAMILIES = {family.name: family for family in DRAWN_FAMILIES if family is not NESTED_SLICE}
COLUMNS = ("total", "thunder", "compile", "run", "eager", "reference", "nudged", "rest")


class PhaseClock:
    """Seconds spent in each phase `in_phase` marks, as a listener (`on_phase_change`) sees them."""

    def __init__(self) -> None:
        self.seconds: Counter = Counter()
        self._phase, self._since = None, time.perf_counter()

    def __call__(self, phase: str | None) -> None:
        now = time.perf_counter()
        if self._phase is not None:
            self.seconds[self._phase] += now - self._since
        self._phase, self._since = phase, now


def compile_and_run_seconds(spec: NetSpec) -> tuple[float, float]:
    """``(first call, second call)`` seconds of thunderfx forward and backward on ``spec``'s network: compile and run,
    then run only (nan where thunder fails)."""
    from thunder.dynamo import thunderfx

    example = build_example(spec)
    torch._dynamo.reset()
    compiled, times = thunderfx(example.net), []
    try:
        for _ in range(2):
            x = fresh_input(example.input)
            start = time.perf_counter()
            forward_backward(compiled, example.net, x, example.cotangent)
            times.append(time.perf_counter() - start)
    except Exception:
        return float("nan"), float("nan")
    finally:
        torch._dynamo.reset()
    return times[0], times[1]


def breakdown(family: str, examples: int, artifacts: Path) -> dict[str, float]:
    """Median seconds per example of ``family`` in each of `COLUMNS`."""
    campaign = Campaign(CampaignConfig(run_dir=artifacts / family, known_issues="xfail"))
    strategy = campaign.strategy(FAMILIES[family]).filter(lambda spec: not known_issues_for(spec))
    rows: list[dict[str, float]] = []

    @fixed_draws(examples)
    @given(data=st.data())
    def one_example(data: st.DataObject) -> None:
        clock = PhaseClock()
        on_phase_change(clock)
        start = time.perf_counter()
        spec = data.draw(strategy, label="spec")
        campaign.run_example(spec)  # a failure is counted (and triaged), not raised
        total = time.perf_counter() - start
        on_phase_change(None)
        clock(None)
        first, second = compile_and_run_seconds(spec) if spec.training is None else (float("nan"),) * 2
        phases = clock.seconds
        rows.append(
            {
                "total": total,
                "thunder": phases["thunder"],
                "compile": first - second,
                "run": second,
                "eager": phases["eager"],
                "reference": phases["reference"],
                "nudged": phases["nudged"],
                "rest": total - sum(phases.values()),
            }
        )

    campaign.start_item()
    one_example()
    return {column: statistics.median(row[column] for row in rows) for column in COLUMNS} | {"examples": len(rows)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=4, help="networks per family (default 4)")
    parser.add_argument("--families", default=",".join(FAMILIES), help="comma-separated, among " + ",".join(FAMILIES))
    args = parser.parse_args(argv)
    families = [f.strip() for f in args.families.split(",") if f.strip()]
    if unknown := [f for f in families if f not in FAMILIES]:
        parser.error(f"--families: unknown {', '.join(unknown)}; choose from {', '.join(FAMILIES)}")
    print(f"{'family':<10}{'nets':>5}" + "".join(f"{column:>10}" for column in COLUMNS))
    with use_converter("fixed"), tempfile.TemporaryDirectory() as artifacts:
        for family in families:
            row = breakdown(family, args.examples, Path(artifacts))
            print(f"{family:<10}{row['examples']:>5}" + "".join(f"{row[column]:>10.3f}" for column in COLUMNS))
    print("seconds per example, medians over the family's networks; compile and run: thunderfx alone, its first call")
    print("minus its second, and its second (nan: thunder failed, or a training example's several steps)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
