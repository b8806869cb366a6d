"""Measure thunderfx's and eager's numerical error against float64, per dtype, to justify
`fuzz.judge.tolerance.TOLERANCES`.

    .venv/bin/python tools/calibrate_tolerances.py --examples 100 --dtypes bfloat16,float16,float32 --out calib.json
    [--device cuda] [--training]

Draws deterministic networks (no random layers, no known issues) with the campaign's strategy,
runs eager, the float64 reference and thunderfx, and records for every compared tensor the
largest error of thunder and of eager against float64, their systematic scale factors
(least-squares alpha, see `fuzz.judge.tolerance`), the tensor's and the example's scale, and the
verdict of the current rule. Prints, per dtype, the quantiles the rule's constants rest on and
how many tensors the rule rejects (each one a false alarm unless thunder is really wrong there).
With ``--training`` the networks train (`fuzz.generate.training`): the first step, the later steps and the state
training leaves (parameters, buffers, optimizer state after the last step) are summarized apart.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

import torch
from hypothesis import HealthCheck, given, settings

from fuzz.generate.training import with_training
from fuzz.judge.thunder_runs import run_thunder
from fuzz.judge.tolerance import _scale_factor, mismatch, truth_name
from fuzz.model_builder import build_example
from fuzz.registry.known_issues import known_issues_for
from fuzz.run.passes import AFTER_TRAINING, AT_STEP, is_state
from fuzz.run.runner import run_eager, run_reference
from fuzz.strategies import net_specs


def _tensors(result: tuple) -> dict[str, torch.Tensor]:
    output, grads = result
    return {"output": output, **{f"grad {k}": v for k, v in grads.items() if v is not None}}


def _measure(spec) -> list[dict]:
    example = build_example(spec)
    eager, reference = run_eager(example), run_reference(example)
    thunder, report, failure = run_thunder(example, "fixed", 60)
    if failure is not None or reference is None or not report.compiled_everything(len(spec.checkpoints)):
        return []
    ref, got, base = _tensors(reference), _tensors(thunder), _tensors(eager)
    # As the oracle: the example's scale is its outputs' and gradients', a state is judged against its truth's entry.
    scale = max((t.abs().max().item() for n, t in ref.items() if t.numel() and not is_state(n)), default=0.0)
    rows = []
    for name, r in ref.items():
        truth = "grad " + truth_name(name.removeprefix("grad "))
        if not r.numel() or name not in got:
            continue
        r, base_tensor = ref.get(truth, r), base.get(truth, base[name])
        alpha_t, alpha_e = _scale_factor(got[name].double(), r), _scale_factor(base_tensor.double(), r)
        part = "after training" if name.endswith(AFTER_TRAINING) else "later steps" if AT_STEP in name else "step 0"
        rows.append({
            "dtype": spec.dtype,
            "part": part,
            "spec": spec.to_json(),
            "tensor": name,
            "thunder_error": (got[name].double() - r).abs().max().item(),
            "eager_error": (base_tensor.double() - r).abs().max().item(),
            "thunder_drift": None if alpha_t is None else abs(alpha_t - 1),
            "eager_drift": None if alpha_e is None else abs(alpha_e - 1),
            "tensor_scale": r.abs().max().item(),
            "example_scale": scale,
            "verdict": mismatch(got[name], base_tensor, r, scale),
        })  # fmt: skip
    return rows


def _quantiles(values: list[float]) -> str:
    if len(values) < 2:
        return "n/a"
    q = statistics.quantiles(values, n=100, method="inclusive")
    return f"median {q[49]:.3g}  p99 {q[98]:.3g}  max {max(values):.3g}"


def summarize(rows: list[dict], dtype: str, part: str = "step 0") -> list[str]:
    """The calibration table of ``dtype``'s rows of ``part`` (the first step, "later steps", "after training")."""
    mine = [r for r in rows if r["dtype"] == dtype and r.get("part", "step 0") == part]
    if not mine:
        return []
    eps = torch.finfo(getattr(torch, dtype)).eps
    drifted = [r for r in mine if r["thunder_drift"] is not None and r["eager_drift"] is not None]
    lines = [f"{dtype}, {part}: {len({r['spec'] for r in mine})} examples, {len(mine)} tensors"]
    for label, values in (
        ("thunder max error / eager max error", [r["thunder_error"] / r["eager_error"] for r in mine
                                                 if r["eager_error"]]),
        ("thunder max error / (eps x example scale)", [r["thunder_error"] / (eps * r["example_scale"]) for r in mine
                                                       if r["example_scale"]]),
        ("thunder scale drift / eps", [r["thunder_drift"] / eps for r in drifted]),
        ("eager scale drift / eps", [r["eager_drift"] / eps for r in drifted]),
    ):  # fmt: skip
        lines.append(f"  {label:45s} {_quantiles(values)}")
    rejected = [r for r in mine if r["verdict"]]
    lines.append(f"  rejected by the current rule: {len(rejected)} tensors")
    lines += [f"    {r['tensor']}: {r['verdict']}" for r in rejected]
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=60, help="examples drawn per dtype")
    parser.add_argument("--dtypes", default="float32,bfloat16,float16")
    parser.add_argument("--out", type=Path, default=Path("calibration.json"))
    parser.add_argument("--device", default="cpu", choices=("cpu", "cuda"), help="where the networks run (cpu)")
    parser.add_argument("--training", action="store_true", help="networks that train for 3 to 5 steps")
    args = parser.parse_args()
    rows: list[dict] = []
    for dtype in args.dtypes.split(","):
        specs = net_specs(device=args.device, dtypes=[dtype])
        specs = (with_training(specs) if args.training else specs).filter(
            lambda s: not s.random and not known_issues_for(s)
        )
        settings(max_examples=args.examples, database=None, deadline=None, suppress_health_check=list(HealthCheck))(
            given(specs)(lambda spec: rows.extend(_measure(spec)))
        )()
        args.out.write_text(json.dumps(rows))
    for dtype in args.dtypes.split(","):
        for part in ("step 0", "later steps", "after training"):
            print("\n".join(summarize(rows, dtype, part)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
