"""The verdict on one example: eager vs thunderfx, classified into one exception type per failure class.

Hypothesis reports (and shrinks) each distinct exception type separately, so one run finds a
forward divergence and a crash as two bugs, each with its own minimal network.
"""

from __future__ import annotations

from typing import ClassVar

from fuzz.parity import compare


class ParityFailure(AssertionError):
    """Thunderfx disagrees with eager on a valid network; subclasses name the failure class."""

    failure_class: ClassVar[str] = "parity-failure"


class ForwardDivergence(ParityFailure):
    """Thunderfx's output differs from eager's (its gradients then usually do too)."""

    failure_class = "forward-divergence"


class GradientDivergence(ParityFailure):
    """The outputs match but a gradient of the input or of a parameter differs."""

    failure_class = "gradient-divergence"


class ThunderCrash(ParityFailure):
    """Thunderfx raised where eager ran; chained to thunder's own exception."""

    failure_class = "thunder-crash"


class ExampleTimeout(ParityFailure):
    """Compiling or running under thunderfx exceeded the per-example time limit."""

    failure_class = "timeout"


def judge(thunder_result: tuple, eager_result: tuple, reference_result: tuple | None = None) -> ParityFailure | None:
    """The failure (not raised) when ``thunder_result`` diverges from eager, else None.

    ``reference_result`` is the float64 eager run for lower-precision networks (see `fuzz.parity`).
    """
    forward, gradients = compare(thunder_result, eager_result, reference_result)
    if forward:
        return ForwardDivergence("\n".join(forward + gradients))
    if gradients:
        return GradientDivergence("\n".join(gradients))
    return None
