"""The smallest float64 gradient error the oracle detects, on a few fixed networks.

    .venv/bin/python -m tools.float64_sensitivity

Each network is compiled once with thunderfx (fixed converter); one of thunder's real gradients is then made wrong
and judged again as the harness judges a float64 example (`fuzz.judge.failures.judge` against eager, with the nudged
probe): scaled by ``1 + delta`` (a systematic error), or, for a gradient whose truth is 0 (a cancellation), moved by
``delta`` times the example's scale. A row gives the smallest ``delta`` of `DELTAS` detected; everything larger is
detected too, or the row says where it is not.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

import torch

from fuzz.generate.spec import CheckpointSpec, LayerSpec, NetSpec
from fuzz.judge.failures import judge
from fuzz.judge.thunder_runs import run_thunder
from fuzz.judge.verdict import _probe
from fuzz.model_builder import build_example
from fuzz.run.runner import run_eager

DELTAS = [10.0**-k for k in range(2, 16)]


@dataclass(frozen=True)
class Case:
    """A float64 network and the gradient made wrong; ``offset``: moved by delta x the example's scale (its truth is
    0), not scaled by 1 + delta."""

    name: str
    spec: NetSpec
    gradient: str
    offset: bool = False


def _spec(layers: list[LayerSpec], checkpoint: tuple[int, int], features: int, batch: int, seed: int = 0) -> NetSpec:
    return NetSpec(
        features=features, batch=batch, dtype="float64", seed=seed, layers=layers,
        checkpoints=[CheckpointSpec(*checkpoint)],
    )  # fmt: skip


LN_LINEAR_LN = [
    LayerSpec("layer_norm", {"elementwise_affine": True}),
    LayerSpec("linear", {"out_features": 1, "bias": True}),
    LayerSpec("layer_norm", {"elementwise_affine": True}),
]
CASES = [
    Case("linear(8->8) -> tanh in a checkpoint: grad of layer0.weight", _spec(
        [LayerSpec("linear", {"out_features": 8, "bias": True}), LayerSpec("tanh")], (0, 2), 8, 4), "layer0.weight"),
    Case("linear(8->8) -> tanh in a checkpoint: grad of the input", _spec(
        [LayerSpec("linear", {"out_features": 8, "bias": True}), LayerSpec("tanh")], (0, 2), 8, 4), "input"),
    Case("mlp(16, gelu) -> softmax in a checkpoint: grad of layer0.0.weight", _spec(
        [LayerSpec("mlp", {"hidden": 16, "out_features": 8, "activation": "gelu"}), LayerSpec("softmax")],
        (0, 2), 8, 3), "layer0.0.weight"),
    Case("layer_norm(8) -> [linear(8->4) -> tanh]: grad of layer1.weight", _spec(
        [LN_LINEAR_LN[0], LayerSpec("linear", {"out_features": 4, "bias": True}), LayerSpec("tanh")], (1, 3), 8, 2),
        "layer1.weight"),
    Case("layer_norm(18) -> [linear(18->1)] -> layer_norm(1): grad of layer1.weight (truth 0)", _spec(
        LN_LINEAR_LN, (1, 2), 18, 2, seed=0), "layer1.weight", offset=True),
    Case("layer_norm(18) -> [linear(18->1)] -> layer_norm(1): grad of layer2.weight (truth 0)", _spec(
        LN_LINEAR_LN, (1, 2), 18, 2, seed=0), "layer2.weight", offset=True),
]  # fmt: skip


def _injected(result: tuple, name: str, delta: float, offset: bool, scale: float) -> tuple:
    out, grads = result
    t = grads[name]
    return out, {**grads, name: t + delta * scale if offset else t * (1 + delta)}


def smallest_detected(case: Case) -> tuple[float | None, str]:
    """The smallest delta of `DELTAS` the oracle detects on ``case``, and what the unmodified example is judged."""
    example = build_example(case.spec)
    eager = run_eager(example)
    thunder, _, failure = run_thunder(example, "fixed", 120)
    if failure is not None:
        return None, f"thunderfx failed: {failure.failure_class}"
    probe = _probe(example)
    unmodified = judge(thunder, eager, None, probe=probe)
    scale = max(t.abs().max().item() for t in (eager[0], *eager[1].values()) if t is not None)
    if case.gradient not in thunder[1]:
        names = ", ".join(thunder[1])
        raise SystemExit(f"{case.name}: no gradient {case.gradient!r} (there are: {names}); fix CASES")
    detected = [
        d for d in DELTAS if judge(_injected(thunder, case.gradient, d, case.offset, scale), eager, None, probe=probe)
    ]
    return (min(detected) if detected else None), ("passes" if unmodified is None else unmodified.failure_class)


def main() -> int:
    torch.set_num_threads(1)
    print("| network: gradient made wrong | unmodified | smallest delta detected |\n|---|---|---|")
    for case in CASES:
        delta, unmodified = smallest_detected(case)
        kind = "offset by delta x S" if case.offset else "scaled by 1 + delta"
        print(f"| {case.name} ({kind}) | {unmodified} | {'none' if delta is None else f'{delta:.0e}'} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
