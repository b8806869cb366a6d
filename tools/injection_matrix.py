"""Measure what the oracle detects: errors injected into thunder's gradients inside checkpoints, per dtype.

    .venv/bin/python -m tools.injection_matrix --examples 15 --out injection.json [--with-fixes]

Draws deterministic networks (no random layers, no known issues) with the campaign's strategy,
keeps those thunder compiled completely and judged equal to eager, and then, on thunder's real
gradients of a tensor inside a compiled checkpoint, injects each error kind and asks the oracle
(`fuzz.judge.failures.judge`, with the float64 reference and the nudged-eager flip probe) again:

- one element zeroed / one element x2: the element of largest magnitude of the largest gradient;
- whole tensor x1.05 / x1.01: that whole gradient;
- a small-scale tensor x2: the gradient whose scale is smallest beside the example's (<= 1%);
- a one-element tensor zeroed: a gradient of one element.

A cell counts the networks where the injection was detected, over those it applied to. ``--with-fixes``: on thunder
with every known fix applied (`fuzz.registry.novelty.fixes_on`), where a campaign judges a failure's novelty.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import thunder
import torch
from hypothesis import HealthCheck, assume, given, settings

from fuzz.generate.spec import DTYPES, CheckpointSpec, LayerSpec, NetSpec
from fuzz.judge.failures import judge
from fuzz.judge.thunder_runs import run_thunder
from fuzz.judge.tolerance import CLEAN_NOISE, _scale_factor, systematic_bound
from fuzz.judge.verdict import _probe
from fuzz.model_builder import build_example
from fuzz.registry.fixes import applied
from fuzz.registry.known_issues import known_issues_for
from fuzz.registry.novelty import fixes_on
from fuzz.run.runner import run_eager, run_reference
from fuzz.strategies import net_specs

SMALL_SCALE = 0.01  # a "small-scale" gradient's largest element, relative to the example's scale


def _largest_element(factor: float) -> Callable[[torch.Tensor], torch.Tensor]:
    def inject(t: torch.Tensor) -> torch.Tensor:
        t = t.clone()
        flat = t.view(-1)
        index = int(flat.double().abs().argmax())
        flat[index] = flat[index] * factor
        return t

    return inject


# kind -> (which gradient it targets, what it does to it)
KINDS: dict[str, tuple[str, Callable[[torch.Tensor], torch.Tensor]]] = {
    "one element zeroed": ("largest", _largest_element(0.0)),
    "one element x2": ("largest", _largest_element(2.0)),
    "whole tensor x1.05": ("largest", lambda t: (t.double() * 1.05).to(t.dtype)),
    "whole tensor x1.01": ("largest", lambda t: (t.double() * 1.01).to(t.dtype)),
    "small-scale tensor x2": ("small", lambda t: t * 2),
    "one-element tensor zeroed": ("one-element", lambda t: torch.zeros_like(t)),
}


def _inside_checkpoint(spec: NetSpec, name: str) -> bool:
    """A parameter gradient ``layer<i>.…`` of a layer inside a compiled (not checkpoint_sequential) checkpoint."""
    if not name.startswith("layer"):
        return False
    index = int(name[len("layer") :].split(".")[0])
    return any(c.start <= index < c.stop and c.api != "sequential" for c in spec.checkpoints)


def _clean(truth: torch.Tensor, eager: torch.Tensor, example_scale: float) -> bool:
    """A gradient that is a value, not rounding noise: eager is within `CLEAN_NOISE` of it (relative norm), and it
    is above float64's noise floor (an attention key bias's gradient is exactly 0 in theory, noise in practice)."""
    norm = truth.double().norm().item()
    noise = (eager.double() - truth.double()).norm().item()
    return norm > 1e-10 * example_scale and noise <= CLEAN_NOISE * norm


def _targets(spec: NetSpec, truth: tuple, eager: tuple) -> dict[str, str]:
    """For each target of `KINDS`, the gradient it hits in this network (absent where there is none)."""
    out, grads = truth
    truths = [t for t in (out, *grads.values()) if t is not None and t.numel()]
    scale = max(t.abs().max().item() for t in truths)
    inside = {
        n: t
        for n, t in grads.items()
        if t is not None and t.numel() and _inside_checkpoint(spec, n) and _clean(t, eager[1][n], scale)
    }
    targets: dict[str, str] = {}
    if many := {n: t for n, t in inside.items() if t.numel() > 1 and t.abs().max() > 0}:
        targets["largest"] = max(many, key=lambda n: many[n].abs().max().item())
    small = {n: t for n, t in inside.items() if 0 < t.abs().max().item() <= SMALL_SCALE * scale}
    if small:
        targets["small"] = min(small, key=lambda n: small[n].abs().max().item())
    if one := [n for n, t in inside.items() if t.numel() == 1 and t.abs().max() > 0]:
        targets["one-element"] = one[0]
    return targets


def measure(spec: NetSpec) -> list[dict]:
    """One row per error kind that applies to ``spec``: whether the oracle detected it, and as what.

    Rejects (`hypothesis.assume`, inside a Hypothesis test) a network with no parameter inside a compiled checkpoint.
    """
    example = build_example(spec)
    if not any(_inside_checkpoint(spec, name) for name, _ in example.net.named_parameters()):
        assume(False)
        return []
    eager, reference = run_eager(example), run_reference(example)
    thunder, report, failure = run_thunder(example, "fixed", 60)
    if failure is not None or not report.compiled_everything(len(spec.checkpoints)):
        return []
    truth = reference if reference is not None else eager
    probe = _probe(example)
    if judge(thunder, eager, reference, probe=probe) is not None:
        return [{"dtype": spec.dtype, "kind": "unmodified", "detected": True, "spec": spec.to_json()}]
    rows = []
    targets = _targets(spec, truth, eager)
    for kind, (target, inject) in KINDS.items():
        if target not in targets:
            continue
        name = targets[target]
        out, grads = thunder
        injected = (out, {**grads, name: inject(grads[name])})
        found = judge(injected, eager, reference, probe=probe)
        rows.append({
            "dtype": spec.dtype,
            "kind": kind,
            "tensor": name,
            "numel": grads[name].numel(),
            "detected": found is not None,
            "as": None if found is None else found.failure_class,
            "message": None if found is None else str(found).splitlines()[-1][:300],
            **({} if found else _why_not(injected[1][name], eager[1][name], truth[1][name])),
            "spec": spec.to_json(),
        })  # fmt: skip
    return rows


def _why_not(injected: torch.Tensor, eager: torch.Tensor, truth: torch.Tensor) -> dict[str, float]:
    """For an undetected injection: its systematic shift and rule 3's bound on the tensor (fuzz.judge.tolerance)."""
    truth = truth.double()
    bound, _, _ = systematic_bound(eager.double(), truth, eager.dtype, measured=True)
    return {"shift": abs((_scale_factor(injected.double(), truth) or 1.0) - 1), "rule3_bound": bound}


def table(rows: list[dict]) -> list[str]:
    """The matrix as a markdown table: detected / networks the injection applied to."""
    cells: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0])
    for row in rows:
        cells[row["kind"], row["dtype"]][0] += row["detected"]
        cells[row["kind"], row["dtype"]][1] += 1
    dtypes = [d for d in DTYPES if any(r["dtype"] == d for r in rows)]
    lines = ["| error kind | " + " | ".join(dtypes) + " |", "|---|" + "---|" * len(dtypes)]
    for kind in ["unmodified", *KINDS]:
        if any(k == kind for k, _ in cells):
            lines.append(f"| {kind} | " + " | ".join(f"{cells[kind, d][0]}/{cells[kind, d][1]}" for d in dtypes) + " |")
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=15, help="networks drawn per dtype")
    parser.add_argument("--dtypes", default=",".join(DTYPES))
    parser.add_argument("--out", type=Path, default=Path("injection_matrix.json"))
    parser.add_argument("--with-fixes", action="store_true", help="every known fix applied to thunder")
    args = parser.parse_args()
    with applied(fixes_on(thunder.__version__)[0] if args.with_fixes else []):
        rows = _rows(args.dtypes.split(","), args.examples, args.out)
    print("\n".join(table(rows)))
    return 0


def _rows(dtypes: list[str], examples: int, out: Path) -> list[dict]:
    rows: list[dict] = []
    for dtype in dtypes:
        specs = net_specs(dtypes=[dtype]).filter(lambda s: not s.random and not known_issues_for(s))
        settings(max_examples=examples, database=None, deadline=None, suppress_health_check=list(HealthCheck))(
            given(specs)(lambda spec: rows.extend(measure(spec)))
        )()
        # Drawn networks rarely hold a one-element gradient: Linear(-> 1) with a bias, then tanh, in a checkpoint.
        for features, seed in ((1, 0), (4, 1), (8, 2)):
            layers = [LayerSpec("linear", {"out_features": 1, "bias": True}), LayerSpec("tanh")]
            spec = NetSpec(features=features, batch=2, dtype=dtype, seed=seed, layers=layers)
            rows.extend(measure(replace(spec, checkpoints=[CheckpointSpec(0, 2)])))
        out.write_text(json.dumps(rows, indent=1))
    return rows


if __name__ == "__main__":
    sys.exit(main())
