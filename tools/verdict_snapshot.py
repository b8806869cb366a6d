"""Per-spec verdicts of a fixed set of specs, to show that a change which should not change verdicts does not.

    .venv/bin/python -m tools.verdict_snapshot OUT.jsonl [--draws 40] [--dtypes float32,bfloat16]
    diff <(jq -c .verdict BEFORE.jsonl) <(jq -c .verdict AFTER.jsonl)

The set: every op-sweep case in ``--dtypes`` on CPU, then ``--draws`` networks drawn from a fixed Hypothesis seed
(derandomized: every run and every machine gets the same ones). One JSON line per spec: the spec and its verdict
("pass", the failure's class and triage, or "invalid: <reason>"), as `check_spec` gives it with no time budget
beyond its per-example limit. Measured: 881 sweep cases in float32 and bfloat16 and 40 draws take 25 minutes on
2 cores (two snapshots side by side).
"""

from __future__ import annotations

import argparse
import json
import time

from hypothesis import HealthCheck, Phase, given, seed, settings

from fuzz.generate.sweep import sweep_specs
from fuzz.judge.verdict import check_spec
from fuzz.strategies import net_specs

_SEED = 20261201


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", help="the JSON-lines file to write")
    parser.add_argument("--draws", type=int, default=40, help="networks drawn from the fixed seed (default 40)")
    parser.add_argument("--dtypes", default="float32,bfloat16", help="the sweep's dtypes (default float32,bfloat16)")
    options = parser.parse_args()
    specs = sweep_specs("cpu", options.dtypes.split(","))

    @seed(_SEED)
    @settings(
        max_examples=options.draws,
        database=None,
        deadline=None,
        derandomize=True,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(net_specs())
    def draw(spec):
        specs.append(spec)

    draw()
    start = time.monotonic()
    with open(options.out, "w") as out:
        for spec in specs:
            outcome = check_spec(spec)
            verdict = outcome.failure.signature if outcome.failure is not None else "pass"
            out.write(json.dumps({"spec": spec.to_json(), "verdict": verdict if outcome.valid else
                                  f"invalid: {outcome.invalid_reason}"}) + "\n")  # fmt: skip
            out.flush()
    print(f"{len(specs)} specs ({options.draws} drawn) in {time.monotonic() - start:.0f} s: {options.out}")


if __name__ == "__main__":
    main()
