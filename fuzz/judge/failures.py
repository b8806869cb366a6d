"""The failure classes: one exception type per way thunderfx can differ from eager (and the triage each carries).

Hypothesis reports (and shrinks) each distinct exception type separately, so one run finds a
forward divergence and a crash as two bugs, each with its own minimal network.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import ClassVar

import torch

from fuzz.judge.tolerance import accuracy_ratio, compare, crash_signature, failure_class
from fuzz.run.runner import time_limit_message


class Triage(Exception):
    """Where a failure comes from, chained as its cause (see `with_triage`); subclasses name the label."""

    label: ClassVar[str] = "untriaged"


class CheckpointSpecific(Triage):
    """Only with checkpointing: thunderfx of the same network without its checkpoints matches eager."""

    label = "checkpoint-specific"


class ThunderGeneral(Triage):
    """Also without checkpointing: thunderfx of the network without its checkpoints fails too."""

    label = "thunder-general"


class Undetermined(Triage):
    """thunderfx of the network without its checkpoints fails otherwise (another class, or a crash of another type):
    another bug there masks whether this one needs the checkpoints. A known issue's signature matches it under either
    of its triages (`fuzz.registry.signatures`)."""

    label = "undetermined"


class EagerInconsistent(Triage):
    """Eager itself gives different results with and without the network's checkpoints."""

    label = "eager-inconsistent"


RESEMBLES = "resembles known issue "  # heads each line that names a known issue a new failure resembles


class ParityFailure(AssertionError):
    """Thunderfx disagrees with eager on a valid network; subclasses name the failure class."""

    failure_class: ClassVar[str] = "parity-failure"
    # The tensors that did not match (`fuzz.judge.tolerance.Mismatch`: name, error, drift), for a divergence or a gap.
    mismatches: tuple = ()
    # Lines naming the known issues a new failure resembles (kept apart from the message: a crash's signature is
    # read from its message).
    resembles: tuple[str, ...] = ()

    @property
    def triage(self) -> str:
        """The label of the `Triage` chained by `with_triage`, or "untriaged"."""
        return self.__cause__.label if isinstance(self.__cause__, Triage) else Triage.label

    @property
    def signature(self) -> str:
        """Failure class and triage label: what tells two bugs apart (each is shrunk separately)."""
        return f"{self.failure_class}-{self.triage}"


class ForwardDivergence(ParityFailure):
    """Thunderfx's output differs from eager's (its gradients then usually do too)."""

    failure_class = "forward-divergence"


class GradientDivergence(ParityFailure):
    """The outputs match but a gradient of the input or of a parameter differs."""

    failure_class = "gradient-divergence"


class StateDivergence(ParityFailure):
    """The output and gradients match, but a tensor the network mutates in place (its input, a buffer such as
    BatchNorm's running statistics) differs after forward or after backward."""

    failure_class = "state-divergence"


class AccuracyGap(ParityFailure):
    """Thunderfx's error against float64 is many times eager's (``ratio``), while it is right on the same network one
    precision up: a matter of precision, triaged apart from wrong results."""

    failure_class = "accuracy"
    ratio: float = 0.0


class MemoryFailure(ParityFailure):
    """The results match, but thunderfx's checkpointed network saves for backward much more than eager's, its
    checkpoints freeing little of what eager's free (`fuzz.judge.memory`): a region no longer checkpointed."""

    failure_class = "memory"


class ThunderCrash(ParityFailure):
    """Thunderfx raised where eager ran; chained to thunder's own exception (see `of`)."""

    failure_class = "thunder-crash"

    @classmethod
    def of(cls, error: BaseException) -> ThunderCrash:
        """The crash of thunder's ``error``, chained like ``raise ... from error``: Hypothesis then tells crashes
        apart by thunder's own origin."""
        crash = cls(f"{_RAISED}{type(error).__name__}: {error}")
        crash.__cause__ = crash.__context__ = error
        return crash

    @property
    def crash_signature(self) -> str:
        """Thunder's exception type and first message line with numbers blanked
        (`fuzz.judge.tolerance.crash_signature`)."""
        error_type, _, message = str(self).removeprefix(_RAISED).partition(": ")
        return crash_signature(error_type, message)


_RAISED = "thunderfx raised "


class ExampleTimeout(ParityFailure):
    """Compiling or running under thunderfx exceeded the per-example time limit."""

    failure_class = "timeout"

    @classmethod
    def after(cls, seconds: float) -> ExampleTimeout:
        return cls(time_limit_message(seconds))

    @property
    def limit_s(self) -> float:
        """The limit that ran out (read back from the message: a failure is recorded as its message)."""
        limit = re.search(r"time limit of ([0-9.e+-]+) s", str(self))
        if limit is None:
            raise ValueError(f"no time limit in the time-out {str(self)!r}; it is written by ExampleTimeout.after")
        return float(limit.group(1))


class WorkerCrash(ParityFailure):
    """The process running the example died: a crash in native code, or a hang the hard time limit ended.

    Reported by the xdist controller from the spec the worker had recorded as in flight.
    """

    failure_class = "worker-crash"


def with_triage(failure: ParityFailure, triage: Triage) -> ParityFailure:
    """``failure`` with ``triage`` chained as its cause (thunder's own exception, if any, behind it).

    Hypothesis tells failures apart by exception type and by the types in their cause chain, so
    a checkpoint-specific and a thunder-general divergence are reported and shrunk as two bugs.
    """
    triage.__cause__ = triage.__context__ = failure.__cause__
    failure.__cause__ = failure.__context__ = triage
    return failure


def judge(
    thunder_result: tuple,
    expected_result: tuple,
    reference_result: tuple | None = None,
    baseline: str = "eager",
    probe: Callable[[], list] | None = None,
    right_one_precision_up: Callable[[], bool] | None = None,
    precision: torch.dtype | None = None,
) -> ParityFailure | None:
    """The failure (not raised) when ``thunder_result`` diverges from ``expected_result``, else None.

    ``expected_result`` is eager's run unless ``baseline`` names another (its name then heads the
    message); ``reference_result`` the float64 eager run for lower-precision networks, ``probe`` the
    nudged eager runs that tell a low-precision threshold flip from an error, ``right_one_precision_up``
    whether thunderfx is right on the network in a wider dtype (an `AccuracyGap` then; see `fuzz.judge.tolerance`),
    ``precision`` the narrowest dtype the network computes in (`NetSpec.precision`).
    """
    forward, gradients = compare(thunder_result, expected_result, reference_result, probe, precision)
    header = [] if baseline == "eager" else [f"judged against {baseline}"]
    kind = failure_class(forward, gradients, right_one_precision_up)
    failure = _failure_of_class(kind, forward, gradients, header, str(expected_result[0].dtype).removeprefix("torch."))
    if failure is not None:
        failure.mismatches = tuple(forward + gradients)
    return failure


def _failure_of_class(
    kind: str | None, forward: list, gradients: list, header: list[str], dtype: str
) -> ParityFailure | None:
    if kind == "accuracy":
        ratio = accuracy_ratio(forward + gradients)
        gap = AccuracyGap(
            "\n".join(
                [
                    f"thunderfx's error against float64 is {ratio:.3g}x eager's in {dtype}, "
                    "while it is right one precision up",
                    *forward,
                    *gradients,
                ]
            )
        )
        gap.ratio = ratio
        return gap
    if kind == "forward-divergence":
        return ForwardDivergence("\n".join(header + forward + gradients))
    if kind == "gradient-divergence":
        return GradientDivergence("\n".join(header + forward + gradients))
    if kind == "state-divergence":
        return StateDivergence("\n".join(header + forward + gradients))
    return None


class KnownIssueChanged(AssertionError):
    """A registered known issue no longer reproduces on the installed thunder, or reproduces on a version its record
    says is fixed (a finding, not a harness error)."""
