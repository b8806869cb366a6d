"""One example's verdict (`check_spec`): spec -> build -> eager and thunderfx runs -> judged by the tolerance rules
(`fuzz.judge.tolerance`) -> a failure class (`fuzz.judge.failures`), triaged."""

from __future__ import annotations

import math
import time
from typing import Any

import torch

from fuzz.generate.reduce import without_randomness
from fuzz.generate.spec import NetSpec
from fuzz.judge.failures import (
    CheckpointSpecific,
    EagerInconsistent,
    ExampleTimeout,
    ForwardDivergence,
    GradientDivergence,
    MemoryFailure,
    ParityFailure,
    StateDivergence,
    ThunderCrash,
    ThunderGeneral,
    Triage,
    Undetermined,
    judge,
    with_triage,
)
from fuzz.judge.limits import DEFAULT_TIMEOUT_S
from fuzz.judge.memory import memory_failure
from fuzz.judge.outcome import (
    ConverterComparison,
    Outcome,
    compiled_everything,
    max_difference,
    relative_error,
    verdict_of,
)
from fuzz.judge.self_consistency import self_consistent
from fuzz.judge.thunder_runs import ThunderRun, ThunderRuns, VerdictCut
from fuzz.judge.tolerance import right_one_precision_up
from fuzz.model_builder import Example, TrainingSteps, build_example
from fuzz.run.passes import NUDGES, finite, nudged_runs
from fuzz.run.runner import (
    CompileReport,
    eager_saved,
    in_phase,
    ours,
    run_eager,
    run_reference,
    training_of,
)


def _non_finite_part(result: tuple, eager: tuple) -> tuple[tuple, tuple]:
    """``result`` and ``eager`` cut down to the tensors where ``result`` is not finite (the output kept as eager's
    where it is finite): what `judge` then reports is only that."""
    (output, grads), (eager_output, eager_grads) = result, eager
    names = [name for name, t in grads.items() if t is not None and not bool(torch.isfinite(t).all())]
    output = output if not bool(torch.isfinite(output).all()) else eager_output
    return (output, {n: grads[n] for n in names}), (eager_output, {n: eager_grads[n] for n in names})


def _probe(example: Example):
    """The nudged eager runs of ``example`` (see `fuzz.run.passes.nudged_runs`), computed when called."""

    def probe():
        with in_phase("nudged"):
            training = training_of(example)
            return ours(nudged_runs, example.net, example.input, example.cotangent, NUDGES, training)

    return probe


def _right_one_precision_up(example: Example, thunder: ThunderRuns, converter: str, reference: tuple):
    """Whether thunderfx is right on ``example`` in the next wider dtype, computed when called
    (`fuzz.judge.tolerance`)."""

    def thunder_run(net, x, cotangent, training):
        steps = None if training is None else TrainingSteps(training.optimizer, training.batches, training.starts)
        return thunder(Example(net, x, cotangent, steps), converter)[0]

    def right():
        # Asked only when they differ: said should the deadline cut this run, not once it has answered.
        before, thunder.found = thunder.found, thunder.found or "its results differ from eager's"
        with in_phase("eager"):  # its thunderfx run marks itself
            net, x, cotangent = example.net, example.input, example.cotangent
            answer = ours(right_one_precision_up, thunder_run, net, x, cotangent, reference, training_of(example))
        thunder.found = before
        return answer

    return right


def _memory(spec: NetSpec, report: CompileReport) -> ParityFailure | None:
    """The memory contract (`fuzz.judge.memory`) of a network whose results match: a `MemoryFailure` where a
    checkpointed region thunder compiled is not recomputed in backward, or not as its selective policy asks (read from
    its traces), else None."""
    if not spec.checkpoint_regions or report.regions is None:
        return None
    if (message := memory_failure(report.regions)) is None:
        return None
    return with_triage(MemoryFailure(message), CheckpointSpecific(f"thunder's traces show {message.splitlines()[0]}"))


def _plain(spec: NetSpec, example: Example) -> Example:
    """``spec``'s network without checkpoints, training from ``example``'s starts (eager's checkpoint recomputation
    updates BatchNorm's statistics twice)."""
    plain = build_example(spec, checkpointing=False)
    if plain.training is not None:
        plain.training.starts = training_of(example).starts
    return plain


def _triage(
    spec: NetSpec,
    example: Example,
    eager: tuple,
    reference: tuple | None,
    thunder: ThunderRuns,
    failure: ParityFailure,
) -> Triage:
    """Whether ``failure`` of ``spec`` (built as ``example``) needs its checkpoints: run eager and thunderfx on its
    `_plain` network. Thunder-general only where that fails the same way (`_failure_kind`); another failure there
    leaves it undetermined.

    Only failures pay for this (a second compile), shrinking steps that fail included.
    """
    if not spec.checkpoint_regions:
        return ThunderGeneral("the network has no checkpoints")
    plain, precision = _plain(spec, example), getattr(torch, spec.precision)
    eager_plain = run_eager(plain)
    if (difference := judge(eager_plain, eager, precision=precision)) is not None:
        return EagerInconsistent(f"eager with vs without checkpoints: {difference}")
    result, _, plain_failure = thunder(plain, "stock")
    plain_failure = plain_failure or judge(result, eager_plain, reference, probe=_probe(plain), precision=precision)
    if plain_failure is None:
        return CheckpointSpecific("thunderfx of the same network without checkpoints matches eager")
    if _failure_kind(plain_failure) == _failure_kind(failure):
        return ThunderGeneral(f"thunderfx without checkpoints fails too: {plain_failure.failure_class}")
    first_line = str(plain_failure).splitlines()[0] if str(plain_failure) else ""
    return Undetermined(f"thunderfx without checkpoints fails otherwise: {plain_failure.failure_class}: {first_line}")


def _failure_kind(failure: ParityFailure) -> str:
    """What two failures must share to be taken for one bug by the triage: a crash's exception type, or being a
    difference in numbers (a bug whose error is an accuracy gap with checkpoints may be a gradient divergence without:
    mish-bfloat16-grad-inaccurate; a crash's message differs with the graph: inductor's C++ errors)."""
    if isinstance(failure, ThunderCrash):
        return f"crash {failure.crash_signature.partition(':')[0]}"
    return "timeout" if isinstance(failure, ExampleTimeout) else "divergence"


def _without_randomness(spec: NetSpec, converter: str, thunder: ThunderRuns) -> ParityFailure | str:
    """A random network's failure when its network without random numbers (`fuzz.generate.reduce.without_randomness`)
    fails too, judged as every deterministic network is (against eager, in its own dtype, probed, triaged): what it
    then finds, forward divergences and one dtype's bugs included, is the network's failure, not two random streams
    (its triage says where it was found; its message is the twin's own, so that its id and crash signature are).
    Otherwise what became of that network, in words."""
    twin = without_randomness(spec)
    if twin is None:
        return "it has no layers but random ones"
    twin_runs = ThunderRuns(thunder.timeout_s, thunder.rerun_timeouts, thunder.deadline)
    outcome = _verdict(twin, converter, twin_runs)
    thunder.reruns += twin_runs.reruns
    # (A time-out: no verdict. A memory failure: the question is whether the values differ without random layers.)
    if outcome.failure is None or isinstance(outcome.failure, (ExampleTimeout, MemoryFailure)):
        return "without its random layers it passes" if outcome.valid else "without its random layers it is not valid"
    if isinstance(triage := outcome.failure.__cause__, Triage):
        triage.args = (f"in the network without its random layers: {triage}",)
    return outcome.failure


def check_spec(
    spec: NetSpec,
    *,
    converter: str = "fixed",
    timeout_s: float | None = DEFAULT_TIMEOUT_S,
    rerun_timeouts: bool = True,
    first_run: ThunderRun | None = None,
    deadline: float = math.inf,
    triaged: bool = True,
) -> Outcome:
    """Run ``spec`` eagerly and under thunderfx with ``converter`` ("fixed", "stock" or "both") and judge.

    A network with random layers is judged against thunderfx of its ``PlainNet`` (no checkpoints,
    same seed) instead of eager: eager and thunder draw different random streams, while
    checkpointing must not change what thunder computes (docs/oracle.md says why this is sound).
    With "both", the verdict is the fixed converter's and ``converter_ab`` compares the stock
    converter's verdict, output and gradients with it.
    A thunderfx run over ``timeout_s`` is run once more before it counts, unless not ``rerun_timeouts``.
    An eager failure is a bug of the harness (specs are valid by construction) and propagates.
    ``first_run``: thunderfx's run of a deterministic network made elsewhere (`fuzz.judge.batch`), judged in place of
    the first one; a report without saved bytes then leaves the memory contract unchecked.
    ``deadline`` (`time.monotonic`): no thunderfx run of the verdict goes more than a second past it; a verdict it
    cuts short is none: the example is invalid (`VERDICT_CUT`).
    Not ``triaged``: a failure is not asked whether it needs its checkpoints (a second compile), for callers that
    need only whether it fails (a known fix's verdict).
    """
    thunder = ThunderRuns(timeout_s, rerun_timeouts, deadline, first=first_run)
    start = time.perf_counter()
    try:
        return _verdict(spec, converter, thunder, triaged)
    except VerdictCut:
        seconds = time.perf_counter() - start
        return Outcome(spec, False, thunder.cut_reason(), seconds=seconds, timeout_reruns=thunder.reruns)


def _plain_baseline(
    spec: NetSpec, eager: Any, precision: torch.dtype, thunder: ThunderRuns
) -> tuple[Any, Any, ParityFailure | None, str]:
    """A random network's baseline, thunderfx's run of it without checkpoints (eager's random stream is not thunder's):
    its result, its report, its own failure against eager (thunder-general), and why the example is invalid (else "")
    when eager itself differs without checkpoints."""
    plain = build_example(spec, checkpointing=False)
    if judge(run_eager(plain), eager, precision=precision) is not None:
        return None, None, None, "eager differs from eager without checkpoints"
    expected, plain_report, failure = thunder(plain, "stock")
    if failure is None and not finite(expected):  # a baseline of NaNs would let anything pass
        failure = judge(*_non_finite_part(expected, eager), precision=precision)
    if failure is not None:
        failure = with_triage(failure, ThunderGeneral("thunderfx fails on the network without checkpoints"))
    return expected, plain_report, failure, ""


def _random_divergence(
    spec: NetSpec, converter: str, thunder: ThunderRuns, failure: ParityFailure, compiled: bool
) -> tuple[ParityFailure, str, str]:
    """A random network's divergence (against thunderfx without checkpoints: the random streams may differ), asked
    again: without its random layers, then (a model) whether its gradient is its own forward's derivative. Returns the
    failure, its triage's text and, where it is no verdict, why the example is invalid (else ""). ``compiled``: thunder
    compiled the whole network with and without checkpoints."""
    triage = "judged against thunderfx without checkpoints"
    deterministic = _without_randomness(spec, converter, thunder)
    if isinstance(deterministic, ParityFailure):
        return deterministic, triage, ""
    if spec.model is not None:
        # Wherever its random ops ran (GPT-2's checkpointed layers go to inductor), ask the one question that
        # does not need equal streams: is the gradient the derivative of the forward it belongs to?
        consistent = self_consistent(spec, thunder, "fixed" if converter == "both" else converter)
        if consistent is True:
            why = "with checkpoints thunderfx draws other random numbers than without; its gradient is the derivative "
            return failure, triage, why + "of its own forward"
        if isinstance(consistent, str):  # no verdict: the difference may be two random streams
            return failure, triage, f"the self-consistency check of a random model could not run: {consistent}"
        return consistent, f"{triage}; {deterministic}; its self-consistency fails", ""
    if not compiled:
        # Part of a network ran outside thunder, drawing eager's random stream: nothing to compare.
        return failure, triage, "a random layer may have run outside thunder"
    return failure, f"{triage}; {deterministic}", ""


def _verdict(spec: NetSpec, converter: str, thunder: ThunderRuns, triaged: bool = True) -> Outcome:
    """`check_spec`'s verdict on ``spec`` with ``thunder``'s runs (`VerdictCut` propagates)."""
    start = time.perf_counter()

    def invalid(reason: str) -> Outcome:
        seconds = time.perf_counter() - start
        return Outcome(spec, valid=False, invalid_reason=reason, seconds=seconds, timeout_reruns=thunder.reruns)

    example = build_example(spec)
    eager = run_eager(example)
    if not finite(eager):
        return invalid("eager produced non-finite values")
    expected, reference, baseline, probe = eager, run_reference(example), "eager", _probe(example)
    precision, example_dtype = getattr(torch, spec.precision), getattr(torch, spec.dtype)
    if spec.random:
        expected, plain_report, failure, invalid_reason = _plain_baseline(spec, eager, precision, thunder)
        if invalid_reason:
            return invalid(invalid_reason)
        if failure is not None:
            return Outcome(
                spec, True, failure=failure, seconds=time.perf_counter() - start, timeout_reruns=thunder.reruns
            )
        # Thunder draws other masks than eager: eager's nudged runs say nothing about thunder's thresholds, so no
        # difference is accepted as a threshold flip (`fuzz.judge.tolerance.compare` without a probe). A cancellation
        # still is: an input gradient of truth 0 (RMSNorm of width 1) is -6e-8 in one thunder run and 0 in the other.
        reference, baseline, probe = None, "thunderfx without checkpoints", None

    eager_bytes = eager_saved(example).bytes if spec.checkpoint_regions else 0

    def run(name: str, verdict: bool = True) -> ThunderRun:
        """thunderfx's run with converter ``name``, judged; ``verdict``: the one the outcome's verdict is."""
        result, report, failure = thunder(example, name)
        if verdict:
            thunder.found = None if failure is None else failure.failure_class
        # Not under autocast (a precision narrower than the dtype): one precision up it would still compute in
        # bfloat16 (or, in float64, not at all).
        up = (
            None
            if reference is None or precision != example_dtype
            else _right_one_precision_up(example, thunder, name, reference)
        )
        failure = failure or judge(result, expected, reference, baseline, probe, up, precision)
        if verdict:
            thunder.found = None if failure is None else failure.failure_class
        if failure is not None:
            return result, report, failure
        return result, report, _memory(spec, report)

    result, report, failure = run("fixed" if converter == "both" else converter)
    random_triage = f"judged against {baseline}"  # a random network's own failure: it ran against its baseline
    if spec.random and isinstance(failure, (ForwardDivergence, GradientDivergence, StateDivergence)):
        compiled = compiled_everything(report, spec.checkpoint_regions) and compiled_everything(plain_report, 0)
        failure, random_triage, invalid_reason = _random_divergence(spec, converter, thunder, failure, compiled)
        if invalid_reason:
            return invalid(invalid_reason)
    if (
        triaged
        and failure is not None
        and not isinstance(failure, ExampleTimeout)
        and not isinstance(failure.__cause__, Triage)
    ):
        # A random network's own failure is against thunderfx without checkpoints, which ran: checkpoint-specific.
        triage = (
            CheckpointSpecific(random_triage)
            if spec.random
            else _triage(spec, example, eager, reference, thunder, failure)
        )
        failure = with_triage(failure, triage)
    comparison = None
    if converter == "both":
        stock_result, _, stock_failure = run("stock", verdict=False)
        comparison = ConverterComparison(
            verdict_of(failure), verdict_of(stock_failure), max_difference(result, stock_result)
        )
    discrepancy = relative_error(result, reference if reference is not None else expected)
    eager_error = None if reference is None else relative_error(eager, reference)
    seconds = time.perf_counter() - start
    unmeasured = report is None or report.saved_bytes is None or not spec.checkpoint_regions
    saved = None if unmeasured else (report.saved_bytes, eager_bytes)
    return Outcome(
        spec, True, None, report, failure, seconds, comparison, discrepancy, thunder.reruns, eager_error, saved
    )
