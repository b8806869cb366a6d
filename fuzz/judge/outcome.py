"""What one example came to (`Outcome`): its verdict, what thunder compiled, the converters side by side, and the
sizes of thunderfx's and eager's errors that the statistics and Hypothesis's targeting read."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import torch

from fuzz.generate.spec import NetSpec
from fuzz.judge.failures import ParityFailure
from fuzz.judge.tolerance import truth_name
from fuzz.run.runner import CompileReport

# The invalid reason of an example whose verdict a deadline cut short (`fuzz.judge.verdict.check_spec`, the known-issue
# check of its failure): no verdict; what thunderfx had found by then, if anything, follows it.
VERDICT_CUT = "cut: the end of the budget came before its verdict"


@dataclass
class ConverterComparison:
    """The stock converter's run beside the fixed one's on one example (``--converter both``)."""

    fixed_verdict: str  # "pass" or the failure class
    stock_verdict: str
    # Largest |stock - fixed| over the output and every gradient; None when either run crashed.
    max_difference: float | None

    @property
    def verdict_differs(self) -> bool:
        return self.fixed_verdict != self.stock_verdict

    @property
    def differs(self) -> bool:
        """The verdict or any output or gradient value (bitwise) differs."""
        return self.verdict_differs or bool(self.max_difference)

    def to_dict(self) -> dict:
        return {**asdict(self), "verdict_differs": self.verdict_differs, "differs": self.differs}


@dataclass
class Outcome:
    """What happened to one spec. ``failure`` is set, not raised, so the caller can record it first."""

    spec: NetSpec
    valid: bool
    invalid_reason: str | None = None
    compile_report: CompileReport | None = None
    failure: ParityFailure | None = None
    seconds: float = 0.0
    converter_ab: ConverterComparison | None = None
    # Largest |thunder - truth| / max|truth| over the output and gradients (truth: the float64
    # reference, else what thunder was judged against): what nightly runs steer toward with target().
    discrepancy: float = 0.0
    timeout_reruns: int = 0  # thunderfx runs over the time limit that were run once more (`ThunderRuns`)
    eager_error: float | None = None  # the same measure for eager against the float64 reference (None: no reference)
    # Bytes saved for backward by the first forward, (thunderfx, eager), of a network with checkpoints that thunder ran
    # (`fuzz.judge.memory`); None otherwise.
    saved_bytes: tuple[int, int] | None = None

    def error_words(self) -> str:
        """The largest relative errors (`relative_error`) of thunderfx and of eager, in words."""
        if self.eager_error is None:
            return f"largest relative error against eager: thunderfx's {self.discrepancy:.2g}"
        return (
            f"largest relative error against the float64 reference: thunderfx's {self.discrepancy:.2g}, "
            f"eager's {self.eager_error:.2g}"
        )

    @property
    def cut_short(self) -> bool:
        """A deadline cut its verdict short (`VERDICT_CUT`): it was not judged."""
        return not self.valid and (self.invalid_reason or "").startswith(VERDICT_CUT)

    @property
    def converters_disagree(self) -> bool | None:
        """With converter "both": whether the stock converter changed the verdict or any value; else None."""
        return None if self.converter_ab is None else self.converter_ab.differs

    @property
    def compiled(self) -> bool:
        """Thunder compiled every graph and every checkpointed region of the network."""
        return compiled_everything(self.compile_report, self.spec.checkpoint_regions)

    @property
    def checkpoints_compiled(self) -> bool:
        """Thunder compiled every checkpointed region (other code may have fallen back)."""
        return checkpoints_in_thunder(self.compile_report, self.spec.checkpoint_regions)


def compiled_everything(report: CompileReport | None, checkpoints: int) -> bool:
    return report is not None and report.compiled_everything(checkpoints)


def checkpoints_in_thunder(report: CompileReport | None, checkpoints: int) -> bool:
    """Thunder compiled all ``checkpoints`` checkpointed regions (other code may fall back: a transformers model's
    mask code does)."""
    return (
        report is not None
        and report.graphs > 0
        and report.thunder_checkpoints == checkpoints
        and not report.fallback_checkpoints
    )


def _tensor_pairs(a: tuple, b: tuple) -> list[tuple[torch.Tensor | None, torch.Tensor | None]]:
    """The outputs, then each gradient by name (None where a run has none), of two runs side by side."""
    (out_a, grads_a), (out_b, grads_b) = a, b
    return [
        (out_a, out_b),
        *((grads_a.get(name), grads_b.get(name)) for name in sorted(grads_a.keys() | grads_b.keys())),
    ]


def max_difference(a: tuple | None, b: tuple | None) -> float | None:
    """The largest elementwise |a - b| over two runs' outputs and gradients (inf where one lacks a gradient)."""
    if a is None or b is None:
        return None
    largest = 0.0
    for x, y in _tensor_pairs(a, b):
        if (x is None) != (y is None) or (x is not None and x.shape != y.shape):
            return float("inf")
        if x is not None and x.numel():
            largest = max(largest, (x.double() - y.double()).abs().max().item())
    return largest


def relative_error(result: tuple | None, truth: tuple) -> float:
    """The largest |result - truth| / scale over the tensors both have (0 for a crashed run); a state after
    backward against the truth's state after forward, as the oracle judges it (`fuzz.judge.tolerance.truth_name`).

    A tensor's scale is its own max|truth|, but at least the example's largest max|truth| times its dtype's epsilon:
    a gradient that is zero up to rounding (1e-30 in the float64 reference) would otherwise make rounding noise of
    1e-17 a relative error of 1e13.
    """
    if result is None:
        return 0.0
    (out, grads), (true_out, true_grads) = result, truth
    pairs = [(out, true_out), *((grads[name], true_grads.get(truth_name(name))) for name in grads)]
    pairs = [(x, t) for x, t in pairs if x is not None and t is not None and x.numel() and x.shape == t.shape]
    largest = max((t.double().abs().max().item() for _, t in pairs), default=0.0)
    errors = []
    for x, t in pairs:
        floor = largest * torch.finfo(x.dtype).eps if x.is_floating_point() else 0.0
        errors.append((x.double() - t.double()).abs().max().item() / (max(t.double().abs().max().item(), floor) or 1.0))
    return math.inf if any(math.isnan(e) for e in errors) else max(errors, default=0.0)


def verdict_of(failure: ParityFailure | None) -> str:
    return "pass" if failure is None else failure.failure_class
