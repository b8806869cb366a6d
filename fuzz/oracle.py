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


def judge(
    thunder_result: tuple, expected_result: tuple, reference_result: tuple | None = None, baseline: str = "eager"
) -> ParityFailure | None:
    """The failure (not raised) when ``thunder_result`` diverges from ``expected_result``, else None.

    ``expected_result`` is eager's run unless ``baseline`` names another (its name then heads the
    message); ``reference_result`` the float64 eager run for lower-precision networks (see `fuzz.parity`).
    """
    forward, gradients = compare(thunder_result, expected_result, reference_result)
    header = [] if baseline == "eager" else [f"judged against {baseline}"]
    if forward:
        return ForwardDivergence("\n".join(header + forward + gradients))
    if gradients:
        return GradientDivergence("\n".join(header + gradients))
    return None
