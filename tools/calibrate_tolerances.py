"""Measure thunderfx's and eager's numerical error against float64, per dtype, to justify `fuzz.parity.TOLERANCES`.

    python tools/calibrate_tolerances.py --examples 120 --dtypes bfloat16,float16,float32 --out calibration.json

Draws deterministic networks (no random layers, no known issues) with the campaign's strategy,
runs eager, the float64 reference and thunderfx, and records for every compared tensor the
largest error of thunder and of eager against float64, the tensor's own scale max|ref| and the
example's scale (the largest max|ref| over its output and gradients). Prints, per dtype, the
quantiles of the ratios the tolerance rule is built on.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

import torch
from hypothesis import HealthCheck, given, settings

from fuzz.harness import _run_thunder
from fuzz.known_issues import known_issues_for
from fuzz.model_builder import build_example
from fuzz.runner import run_eager, run_reference
from fuzz.strategies import net_specs


def _tensors(result: tuple) -> dict[str, torch.Tensor]:
    output, grads = result
    return {"output": output, **{f"grad {k}": v for k, v in grads.items() if v is not None}}


def _measure(spec) -> list[dict] | None:
    example = build_example(spec)
    eager, reference = run_eager(example), run_reference(example)
    thunder, report, failure = _run_thunder(example, "fixed", 60)
    if failure is not None or reference is None or not report.compiled_everything(len(spec.checkpoints)):
        return None
    ref, got, base = _tensors(reference), _tensors(thunder), _tensors(eager)
    scale = max(t.abs().max().item() for t in ref.values() if t.numel())
    rows = []
    for name, r in ref.items():
        if not r.numel() or name not in got:
            continue
        thunder, eager = got[name].double() - r, base[name].double() - r
        norm = r.norm().item()
        rows.append({
            "dtype": spec.dtype,
            "tensor": name,
            "thunder_error": thunder.abs().max().item(),
            "eager_error": eager.abs().max().item(),
            "thunder_rel_norm": thunder.norm().item() / norm if norm else None,
            "eager_rel_norm": eager.norm().item() / norm if norm else None,
            # |<x, ref> / <ref, ref> - 1|: the systematic scale error (a gradient off by a constant factor).
            "thunder_drift": abs((got[name].double() * r).sum().item() / norm**2 - 1) if norm else None,
            "eager_drift": abs((base[name].double() * r).sum().item() / norm**2 - 1) if norm else None,
            "tensor_scale": r.abs().max().item(),
            "example_scale": scale,
        })  # fmt: skip
    return rows


def _quantiles(values: list[float]) -> str:
    if len(values) < 2:
        return "n/a"
    q = statistics.quantiles(values, n=100, method="inclusive")
    return f"median {q[49]:.3g}  p99 {q[98]:.3g}  max {max(values):.3g}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=60, help="examples per dtype")
    parser.add_argument("--dtypes", default="float32,bfloat16,float16")
    parser.add_argument("--out", type=Path, default=Path("calibration.json"))
    args = parser.parse_args()
    rows: list[dict] = []
    for dtype in args.dtypes.split(","):
        specs = net_specs(dtypes=[dtype]).filter(lambda s: not s.random and not known_issues_for(s))
        settings(max_examples=args.examples, database=None, deadline=None, suppress_health_check=list(HealthCheck))(
            given(specs)(lambda spec: rows.extend(_measure(spec) or []))
        )()
    args.out.write_text(json.dumps(rows))
    for dtype in args.dtypes.split(","):
        mine = [r for r in rows if r["dtype"] == dtype]
        eps = torch.finfo(getattr(torch, dtype)).eps
        print(f"{dtype}: {len(mine)} tensors")
        ratio = [r["thunder_error"] / r["eager_error"] for r in mine if r["eager_error"] > 0]
        normed = [r for r in mine if r["thunder_rel_norm"] is not None]
        for label, values in (
            ("thunder max error / eager max error", ratio),
            (
                "thunder max error / (eps * example scale)",
                [r["thunder_error"] / (eps * r["example_scale"]) for r in mine],
            ),
            ("eager max error / (eps * example scale)", [r["eager_error"] / (eps * r["example_scale"]) for r in mine]),
            ("thunder relative norm error / eps", [r["thunder_rel_norm"] / eps for r in normed]),
            ("eager relative norm error / eps", [r["eager_rel_norm"] / eps for r in normed]),
            (
                "thunder / eager relative norm error",
                [r["thunder_rel_norm"] / r["eager_rel_norm"] for r in normed if r["eager_rel_norm"] > 0],
            ),
        ):
            print(f"  {label:45s} {_quantiles(values)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
