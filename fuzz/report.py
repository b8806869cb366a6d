"""Artifacts of a campaign: a standalone repro.py and spec.json per failure, and the summary."""

from __future__ import annotations

import hashlib
import inspect
import json
import math
import subprocess
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import fuzz.parity
from fuzz.coverage import traits
from fuzz.fix import describe, meta_preserving
from fuzz.harness import Outcome
from fuzz.model_builder import network_source
from fuzz.oracle import ExampleTimeout, ParityFailure, ThunderCrash
from fuzz.reduce import PLUMBING
from fuzz.run_folder import FAILURE_RECORD, write_atomically
from fuzz.spec import NetSpec

_REPRO_MAIN = """

def _verdict():
    \"\"\"(failure class or "pass", the crash signature for a crash, else "") of thunderfx on this network.\"\"\"
    import copy
    import traceback

    import thunder.dynamo.utils
    import thunder.extend
    from thunder.dynamo import thunderfx

    if CONVERTER == "fixed":
        stock = thunder.dynamo.utils._checkpoint_function_converter
        thunder.dynamo.utils._checkpoint_function_converter = meta_preserving(stock)
    if EXECUTORS:  # else thunder's default executors
        thunder.extend.set_default_executors([thunder.extend.get_executor(name) for name in EXECUTORS])
    net, x, cotangent = make_example()
    if TIME_LIMIT_S is not None:
        # Thunder's first compile in a process pays one-off set-up, which the campaign's limit did not count (it runs
        # a time-out once more before counting it): a one-layer network pays it before any clock starts.
        warm_up = torch.nn.Linear(1, 1, device=DEVICE, dtype=DTYPE)
        thunderfx(warm_up)(torch.ones(1, 1, device=DEVICE, dtype=DTYPE)).sum().backward()
    try:
        if RANDOM:
            # Eager and thunder draw different random streams: the expected result is thunderfx's
            # own run of the same network without checkpoints, under the same seed.
            plain, _, _ = make_example(checkpointing=False)
            expected = _limited(lambda: forward_backward(thunderfx(plain), plain, fresh_input(x), cotangent))
            reference, probe = None, None
        thunder_net = copy.deepcopy(net)
        result = _limited(lambda: forward_backward(thunderfx(thunder_net), thunder_net, fresh_input(x), cotangent))
    except Exception as error:
        traceback.print_exc()
        return "thunder-crash", crash_signature(type(error).__name__, str(error))
    up = None
    if not RANDOM:
        eager_net = copy.deepcopy(net)
        expected = forward_backward(eager_net, eager_net, fresh_input(x), cotangent)
        reference = float64_reference(net, x, cotangent) if DTYPE != torch.float64 else None
        probe = lambda: nudged_runs(net, x, cotangent)  # noqa: E731
        if reference is not None:
            up = lambda: right_one_precision_up(_thunderfx_run, net, x, cotangent, reference)  # noqa: E731
    forward, gradients = compare(result, expected, reference, probe)
    for line in forward + gradients:
        print(line)
    return failure_class(forward, gradients, up) or "pass", ""


def _limited(thunderfx_run):
    \"\"\"``thunderfx_run()``; for a recorded time-out, each run under the recorded limit, as in the campaign.\"\"\"
    if TIME_LIMIT_S is None:
        return thunderfx_run()
    import threading

    watchdog = threading.Timer(TIME_LIMIT_S, _ran_past_the_time_limit)
    watchdog.daemon = True
    watchdog.start()
    try:
        return thunderfx_run()
    finally:
        watchdog.cancel()


def _ran_past_the_time_limit():
    print(f"REPRODUCED: timeout (thunderfx ran past the time limit of {TIME_LIMIT_S:g} s)", flush=True)
    os._exit(1)  # thunderfx's run is not waited for: it may take many minutes more


def _thunderfx_run(net, x, cotangent):
    \"\"\"thunderfx's `forward_backward` of ``net``, or None where it raised.\"\"\"
    from thunder.dynamo import thunderfx

    try:
        return forward_backward(thunderfx(net), net, fresh_input(x), cotangent)
    except Exception:
        return None


def main():
    try:
        verdict, signature = _verdict()
    except Exception:
        import traceback

        traceback.print_exc()
        print("COULD NOT RUN: the repro failed outside thunderfx's run")
        return 2
    if verdict == "pass":
        print(f"NOT REPRODUCED: thunderfx matches {'itself without checkpoints' if RANDOM else 'eager'}")
        return 0
    if (verdict, signature) == (EXPECTED_CLASS, EXPECTED_ERROR):
        print(f"REPRODUCED: {verdict} {signature}".rstrip())
        return 1
    print(f"OTHER FAILURE: {verdict} {signature} where {EXPECTED_CLASS} {EXPECTED_ERROR} was recorded")
    return 2


if __name__ == "__main__":
    sys.exit(main())
"""

# First in every repro.py: an exception before `main` (an import that fails) exits 2, not Python's 1.
_REPRO_PRELUDE = """from __future__ import annotations

import os
import sys


def _could_not_run(kind, value, tb):
    sys.__excepthook__(kind, value, tb)
    print("COULD NOT RUN: the repro failed before thunderfx ran", flush=True)
    sys.stderr.flush()
    os._exit(2)


sys.excepthook = _could_not_run
"""


def op_key(params: dict[str, Any]) -> str:
    """An op layer's coverage cell: its op and call form."""
    return f"{params['op']} {params.get('form', 'module')}"


def spec_digest(spec: NetSpec) -> str:
    """A short hash of the whole spec."""
    return hashlib.sha1(spec.to_json().encode()).hexdigest()[:12]


def failure_id(spec: NetSpec, failure: ParityFailure) -> str:
    """A stable id for a bug: failure class, triage label and a hash of what tells this failure apart.

    The hash covers the layer kinds (an op layer's call), the checkpoint APIs, the dtype, and what
    failed: thunder's exception type and message (numbers blanked) for a crash, the tensors that did
    not match otherwise. Not sizes or seed, so two shards that shrink the same bug to slightly
    different networks name it alike; `write_failure` keeps both networks.
    """
    essence = {
        # An op layer by its callable (which names the form) and keyword arguments: each op's bug gets its own id.
        "layers": [
            [layer.kind, layer.params["target"], layer.params["kwargs"]] if "op" in layer.params else layer.kind
            for layer in spec.layers
        ],
        "checkpoints": [c.api for c in spec.checkpoints],
        "dtype": spec.dtype,
        "what": _what_failed(failure),
    }
    digest = hashlib.sha1(json.dumps(essence, sort_keys=True).encode()).hexdigest()[:8]
    return f"{failure.signature}-{digest}"


def _what_failed(failure: ParityFailure) -> list[str]:
    """A crash's `ThunderCrash.crash_signature`; else the names of the tensors that differ."""
    lines = str(failure).splitlines()
    if isinstance(failure, ThunderCrash):
        return [failure.crash_signature]
    return sorted({line.partition(":")[0] for line in lines if line.startswith(("output:", "grad of "))})


def repro_source(spec: NetSpec, failure: ParityFailure, converter: str, executors: Sequence[str] = ()) -> str:
    """A standalone script (plain torch + thunder): exit 0 when thunderfx matches, 1 when the same failure
    (class, and `ThunderCrash.crash_signature` for a crash; for a time-out, thunderfx still running after the
    recorded limit) reproduces, 2 on anything else.

    ``executors``: thunder's default executors the failure was found with (empty: thunder's own defaults).
    Its header names the installed thunder, torch and converter (`found_with`).
    """
    summary = str(failure).splitlines()[0] if str(failure) else ""
    converter_source = inspect.getsource(meta_preserving) if converter == "fixed" else ""
    return (
        f'"""Repro: {failure.failure_class} ({failure.triage}) of thunderfx against eager PyTorch.\n\n'
        f"Found with {found_with(converter)}.\n"
        f"First observed: {_docstring_safe(summary)}\n"
        "Exit status: 0 thunderfx matches, 1 this failure reproduces, 2 anything else (could not run, another "
        f"failure).\nNeeds only torch{', transformers' if spec.model else ''} and lightning-thunder.\n"
        '"""\n\n'
        + _REPRO_PRELUDE
        + network_source(spec)
        + f"\n\nCONVERTER = {converter!r}\nEXECUTORS = {list(executors)!r}\nRANDOM = {spec.random}\n"
        + f"EXPECTED_CLASS = {failure.failure_class!r}\n"
        + f"EXPECTED_ERROR = {getattr(failure, 'crash_signature', '')!r}\n"
        + f"TIME_LIMIT_S = {failure.limit_s if isinstance(failure, ExampleTimeout) else None!r}\n\n\n"
        + inspect.getsource(fuzz.parity)
        + ("\n\n\n" + converter_source if converter_source else "")
        + _REPRO_MAIN
    )


def _docstring_safe(text: str) -> str:
    """``text`` as it can stand inside a triple-quoted docstring."""
    return text.replace("\\", "\\\\").replace('"""', '\\"\\"\\"')


def found_with(converter: str) -> str:
    """The installed thunder and torch, and the converter ``converter`` on them, in words."""
    import thunder
    import torch

    return f"lightning-thunder {thunder.__version__}, torch {torch.__version__}; converter {describe(converter)}"


def write_failure(
    artifacts: Path,
    spec: NetSpec,
    failure: ParityFailure,
    converter: str,
    name: str | None = None,
    executors: Sequence[str] = (),
    listed: bool = True,
) -> Path:
    """Write ``<artifacts>/<name or failure-id>/{spec.json,repro.py,failure.txt,triage.txt}`` and, for a failure a
    run's summary lists (``listed``; not a registry entry), ``failure.json``; returns the directory.

    Never overwrites another network: when the folder already holds a different spec (the same bug,
    shrunk to another network), this one goes to its ``variants/<spec digest>/`` folder instead.
    """
    directory = artifacts / (name or failure_id(spec, failure))
    spec_json = spec.to_json() + "\n"
    if (directory / "spec.json").exists() and (directory / "spec.json").read_text() != spec_json:
        directory = directory / "variants" / spec_digest(spec)
    directory.mkdir(parents=True, exist_ok=True)
    write_atomically(directory / "spec.json", spec_json)
    write_atomically(directory / "repro.py", repro_source(spec, failure, converter, executors))
    write_atomically(
        directory / "failure.txt",
        "".join(f"{line}\n" for line in [f"{type(failure).__name__}: {failure}", *failure.resembles]),
    )
    write_atomically(directory / "triage.txt", f"{failure.triage}: {failure.__cause__}\n")
    if listed:
        write_atomically(directory / FAILURE_RECORD, json.dumps(failure_record(spec, failure, directory)) + "\n")
    return directory


def failure_record(spec: NetSpec, failure: ParityFailure, directory: Path) -> dict[str, Any]:
    """What the summary lists of a failure written to ``directory`` (also its ``failure.json``)."""
    return {
        "id": failure_id(spec, failure),
        "class": failure.failure_class,
        "triage": failure.triage,
        "message": str(failure).splitlines()[0] if str(failure) else "",
        "repro": str(directory.resolve() / "repro.py"),  # absolute: the report links it from anywhere
        # The known issues its spec matches whose signature or band it falls outside (`fuzz.campaign.record`).
        "resembles": list(failure.resembles),
        "blames": blames(spec),
    }


def blames(spec: NetSpec) -> str | None:
    """What a failure of the op family blames (None outside it): its ops, or the plumbing when no op is left
    (reduction replaced each op by identity and the failure stayed, `fuzz.reduce`)."""
    named = [f"op {layer.params['op']}" for layer in spec.layers if "op" in layer.params]
    if any(layer.kind == PLUMBING for layer in spec.layers):
        named.append("the op family's plumbing (adapt, fold) with the op replaced by identity")
    return ", ".join(named) or None


@dataclass
class Confirmation:
    """A failure's repro.py run in a fresh interpreter (``confirmed`` None: not run, ``how`` says why)."""

    confirmed: bool | None
    how: str
    seconds: float = 0.0


# Failures whose repro.py a campaign runs to confirm them (exit 1): not a time-out's, which takes its whole time
# limit to say "reproduced", nor a dead worker's, which crashes.
CONFIRMABLE = ("forward-divergence", "gradient-divergence", "state-divergence", "accuracy", "thunder-crash")


def confirm(directory: Path, failure: ParityFailure, timeout_s: float) -> Confirmation:
    """Run ``directory/repro.py`` in a fresh interpreter; confirmed when it exits 1 (the same failure reproduced).

    Only for `CONFIRMABLE` failures (others are not run). The repro's output goes to ``confirmation.txt``.
    """
    if failure.failure_class not in CONFIRMABLE:
        return Confirmation(
            None, f"not checked: a {failure.failure_class}'s repro runs out its time limit or crashes; run it by hand"
        )
    start = time.perf_counter()
    try:
        run = subprocess.run(
            [sys.executable, "repro.py"], cwd=directory, capture_output=True, text=True, timeout=timeout_s
        )
        status, output = run.returncode, run.stdout + run.stderr
    except subprocess.TimeoutExpired as expired:
        status, output = None, "".join(_text(out) for out in (expired.stdout, expired.stderr))
    seconds = round(time.perf_counter() - start, 2)
    confirmed = status == 1
    how = f"timed out after {timeout_s:g} s" if status is None else f"exit status {status}"
    verdict = "reproduced in a fresh interpreter" if confirmed else "NOT reproduced in a fresh interpreter"
    write_atomically(directory / "confirmation.txt", f"{verdict} ({how}, {seconds} s)\n\n{output[-20000:]}")
    return Confirmation(confirmed, f"{verdict} ({how})", seconds)


def _text(output: str | bytes | None) -> str:
    return output.decode(errors="replace") if isinstance(output, bytes) else output or ""


_TIMELINE_S = 10
LOWEST_DECADE = -17  # float64's resolution is 1e-16: an error of 0 counts here
HIGHEST_DECADE = 2  # 100 times the largest true value and beyond (NaN and inf too)


def _decade(error: float) -> int:
    """The decade ``error`` lies in (``10**d <= error < 10**(d+1)``), clamped to the plotted range (0 is lowest)."""
    if error == 0:
        return LOWEST_DECADE
    if not math.isfinite(error):
        return HIGHEST_DECADE
    return min(HIGHEST_DECADE, max(LOWEST_DECADE, math.floor(math.log10(error))))


@dataclass
class CampaignStats:
    """Counters of one process's examples; merged across xdist workers for the summary."""

    examples: int = 0
    valid: int = 0
    compiled: int = 0
    fell_back: int = 0
    seconds: float = 0.0
    repeats: int = 0  # Hypothesis calls answered from memory (a network the shard had already run)
    timeout_reruns: int = 0  # thunderfx runs over the time limit, run once more before counting as a time-out
    converter_comparisons: int = 0
    converter_disagreements: int = 0  # verdict or any value differs
    converter_verdict_changes: int = 0
    failing_examples: Counter = field(default_factory=Counter)
    invalid_reasons: Counter = field(default_factory=Counter)
    coverage: Counter = field(default_factory=Counter)  # trait (see fuzz.coverage) -> examples run with it
    fell_back_coverage: Counter = field(default_factory=Counter)  # trait -> valid examples thunder fell back on
    failures: list[dict[str, Any]] = field(default_factory=list)
    first_failure: dict[str, Any] | None = None
    # known issue id -> [examples where it reproduced, examples where it did not]
    known_issues: defaultdict[str, list[int]] = field(default_factory=lambda: defaultdict(lambda: [0, 0]))
    known_issue_checks: dict[str, str] = field(default_factory=dict)  # id -> verdict of --known-issues check
    discarded: int = 0  # drawn specs not run: a known issue they match is slow (its cost is the problem)
    discarded_reasons: Counter = field(default_factory=Counter)  # id of the slow issue -> specs not run for it
    known_class_failures: int = 0  # failing examples that matched a known issue's signature inside its band
    known_resembling_failures: int = 0  # failing examples of a known issue's class outside its signature or band
    known_explained_failures: int = 0  # of those, the ones that went away without the issue's trigger
    # "<op> <form>" of op layers inside checkpoints -> [examples thunder compiled them in, fell back, failed]
    op_coverage: defaultdict[str, list[int]] = field(default_factory=lambda: defaultdict(lambda: [0, 0, 0]))
    op_split_reasons: defaultdict[str, Counter] = field(default_factory=lambda: defaultdict(Counter))
    op_first_compiled_s: dict[str, float] = field(default_factory=dict)  # op -> campaign time it first compiled
    # "<layer kind or op>\t<checkpoint api>\t<dtype>" -> [valid examples thunder compiled it in a checkpoint, fell back]
    checkpoint_grid: defaultdict[str, list[int]] = field(default_factory=lambda: defaultdict(lambda: [0, 0]))
    # "<dtype>\t<thunder|eager>\t<decade>" -> valid examples whose largest relative error vs the float64 reference
    # (`Outcome.discrepancy`, `Outcome.eager_error`) lies in [10**decade, 10**(decade+1)); the lowest decade holds 0
    error_decades: Counter = field(default_factory=Counter)
    timeline: Counter = field(default_factory=Counter)  # epoch second (a multiple of 10) -> examples finished in it
    gpus: dict[str, str] = field(default_factory=dict)  # xdist worker -> the CUDA_VISIBLE_DEVICES it was pinned to

    def record(self, outcome: Outcome, elapsed_s: float, expected: bool = False) -> None:
        """Count ``outcome``, ``elapsed_s`` into the campaign; ``expected``: it is a known issue's failure."""
        self.examples += 1
        self.seconds += outcome.seconds
        self.timeout_reruns += outcome.timeout_reruns
        self.coverage.update(traits(outcome.spec))
        self.timeline[str(int(time.time() // _TIMELINE_S * _TIMELINE_S))] += 1
        failed = outcome.failure is not None and not expected
        if failed and self.first_failure is None:
            self.first_failure = {"after_s": round(elapsed_s, 2), "example": self.examples}
        if not outcome.valid:
            self.invalid_reasons[outcome.invalid_reason] += 1
            return
        self.valid += 1
        if outcome.compiled:
            self.compiled += 1
        elif outcome.compile_report is not None:
            self.fell_back += 1
            self.fell_back_coverage.update(traits(outcome.spec))
        if failed:
            self.failing_examples[outcome.failure.signature] += 1
        self._record_ops(outcome, failed, elapsed_s)
        self._record_grid_and_errors(outcome)
        if outcome.converter_ab is not None:
            self.converter_comparisons += 1
            self.converter_disagreements += outcome.converter_ab.differs
            self.converter_verdict_changes += outcome.converter_ab.verdict_differs

    def _record_ops(self, outcome: Outcome, failed: bool, elapsed_s: float) -> None:
        """Count each checkpointed op layer as compiled (thunder compiled every checkpointed region), fell back, failed.

        A network whose regions thunder compiled only in part counts all its op layers as fallen
        back: never claims an op was exercised in a compiled checkpoint when it might not have been.
        """
        spec = outcome.spec
        for index, layer in enumerate(spec.layers):
            if "op" not in layer.params or not spec.checkpointed(index):
                continue
            key = op_key(layer.params)
            if outcome.compiled:
                self.op_coverage[key][0] += 1
                self.op_first_compiled_s.setdefault(layer.params["op"], round(elapsed_s, 1))
            elif outcome.compile_report is not None:
                self.op_coverage[key][1] += 1
                for reason in outcome.compile_report.split_reasons[:1]:
                    self.op_split_reasons[key][reason.splitlines()[0][:200]] += 1
            if failed:
                self.op_coverage[key][2] += 1

    def _record_grid_and_errors(self, outcome: Outcome) -> None:
        """Count the valid ``outcome``'s checkpointed layers per API and dtype, and the decades of its errors."""
        spec = outcome.spec
        if outcome.compile_report is not None and spec.model is not None and spec.checkpoint_regions:
            cell = f"{spec.model.arch}\tgradient_checkpointing_enable\t{spec.dtype}"
            self.checkpoint_grid[cell][0 if outcome.checkpoints_compiled else 1] += 1
        if outcome.compile_report is not None:
            for ckpt in spec.checkpoints:
                for layer in spec.layers[ckpt.start : ckpt.stop]:
                    name = layer.params["op"] if "op" in layer.params else layer.kind
                    self.checkpoint_grid[f"{name}\t{ckpt.api}\t{spec.dtype}"][0 if outcome.compiled else 1] += 1
        # Both against the float64 reference (a random network has none; a crash has no error to count).
        if outcome.eager_error is not None and (outcome.failure is None or outcome.discrepancy):
            self.error_decades[f"{spec.dtype}\tthunder\t{_decade(outcome.discrepancy)}"] += 1
            self.error_decades[f"{spec.dtype}\teager\t{_decade(outcome.eager_error)}"] += 1

    def record_final_failure(
        self,
        spec: NetSpec,
        failure: ParityFailure,
        directory: Path,
        elapsed_s: float,
        confirmation: Confirmation | None,
    ) -> dict[str, Any]:
        """A shrunk failure of ``spec``, ``elapsed_s`` into the campaign, written to ``directory``; returns its record
        (`set_confirmation` updates it)."""
        record = {
            **failure_record(spec, failure, directory),
            "shrunk_after_s": round(elapsed_s, 2),
            "after_examples": self.examples,
        }
        self.failures.append(record)
        self.set_confirmation(record, confirmation)
        return record

    @staticmethod
    def set_confirmation(record: dict[str, Any], confirmation: Confirmation | None) -> None:
        """Put ``confirmation`` (None: turned off) into a failure ``record``."""
        record["confirmed"] = None if confirmation is None else confirmation.confirmed
        record["confirmation"] = "not checked: --fuzz-confirm no" if confirmation is None else confirmation.how
        record["confirmation_seconds"] = None if confirmation is None else confirmation.seconds

    def to_dict(self) -> dict[str, Any]:
        return {
            "examples": self.examples,
            "valid": self.valid,
            "compiled_by_thunder": self.compiled,
            "fell_back": self.fell_back,
            "seconds": round(self.seconds, 3),
            "repeats": self.repeats,
            "timeout_reruns": self.timeout_reruns,
            "converter_comparisons": self.converter_comparisons,
            "converter_disagreements": self.converter_disagreements,
            "converter_verdict_changes": self.converter_verdict_changes,
            "failing_examples_by_class": dict(self.failing_examples),
            "invalid_reasons": dict(self.invalid_reasons),
            "coverage": dict(sorted(self.coverage.items())),
            "fell_back_coverage": dict(sorted(self.fell_back_coverage.items())),
            "first_failure": self.first_failure,
            "failures": self.failures,
            "known_issues": dict(self.known_issues),
            "known_issue_checks": self.known_issue_checks,
            "discarded": self.discarded,
            "discarded_reasons": dict(self.discarded_reasons),
            "known_class_failures": self.known_class_failures,
            "known_resembling_failures": self.known_resembling_failures,
            "known_explained_failures": self.known_explained_failures,
            "op_coverage": dict(sorted(self.op_coverage.items())),
            "op_split_reasons": {key: dict(reasons) for key, reasons in sorted(self.op_split_reasons.items())},
            "op_first_compiled_s": self.op_first_compiled_s,
            "checkpoint_grid": dict(sorted(self.checkpoint_grid.items())),
            "error_decades": dict(sorted(self.error_decades.items())),
            "timeline": dict(sorted(self.timeline.items())),
            "gpus": dict(sorted(self.gpus.items())),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CampaignStats:
        return cls(
            examples=data["examples"],
            valid=data["valid"],
            compiled=data["compiled_by_thunder"],
            fell_back=data["fell_back"],
            seconds=data["seconds"],
            repeats=data.get("repeats", 0),
            timeout_reruns=data.get("timeout_reruns", 0),
            converter_comparisons=data["converter_comparisons"],
            converter_disagreements=data["converter_disagreements"],
            converter_verdict_changes=data["converter_verdict_changes"],
            failing_examples=Counter(data["failing_examples_by_class"]),
            invalid_reasons=Counter(data["invalid_reasons"]),
            coverage=Counter(data["coverage"]),
            fell_back_coverage=Counter(data["fell_back_coverage"]),
            failures=list(data["failures"]),
            first_failure=data["first_failure"],
            known_issues=defaultdict(lambda: [0, 0], data["known_issues"]),
            known_issue_checks=dict(data["known_issue_checks"]),
            discarded=data.get("discarded", 0),
            discarded_reasons=Counter(data.get("discarded_reasons", {})),
            known_class_failures=data.get("known_class_failures", 0),
            known_resembling_failures=data.get("known_resembling_failures", 0),
            known_explained_failures=data.get("known_explained_failures", 0),
            op_coverage=defaultdict(lambda: [0, 0, 0], data.get("op_coverage", {})),
            op_split_reasons=defaultdict(
                Counter, {key: Counter(reasons) for key, reasons in data.get("op_split_reasons", {}).items()}
            ),
            op_first_compiled_s=dict(data.get("op_first_compiled_s", {})),
            checkpoint_grid=defaultdict(lambda: [0, 0], data.get("checkpoint_grid", {})),
            error_decades=Counter(data.get("error_decades", {})),
            timeline=Counter(data.get("timeline", {})),
            gpus=dict(data.get("gpus", {})),
        )

    def merge(self, other: CampaignStats) -> None:
        for name in (
            "examples",
            "valid",
            "compiled",
            "fell_back",
            "seconds",
            "repeats",
            "timeout_reruns",
            "converter_comparisons",
            "converter_disagreements",
            "converter_verdict_changes",
            "discarded",
            "known_class_failures",
            "known_resembling_failures",
            "known_explained_failures",
        ):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        for key, counts in other.op_coverage.items():
            self.op_coverage[key] = [a + b for a, b in zip(self.op_coverage[key], counts, strict=True)]
        for key, reasons in other.op_split_reasons.items():
            self.op_split_reasons[key] += reasons
        for key, counts in other.checkpoint_grid.items():
            self.checkpoint_grid[key] = [a + b for a, b in zip(self.checkpoint_grid[key], counts, strict=True)]
        self.error_decades += other.error_decades
        self.timeline += other.timeline
        for op, seconds in other.op_first_compiled_s.items():
            self.op_first_compiled_s[op] = min(seconds, self.op_first_compiled_s.get(op, seconds))
        self.failing_examples += other.failing_examples
        self.invalid_reasons += other.invalid_reasons
        self.discarded_reasons += other.discarded_reasons
        self.coverage += other.coverage
        self.fell_back_coverage += other.fell_back_coverage
        self.failures += other.failures
        self.known_issue_checks.update(other.known_issue_checks)
        self.gpus.update(other.gpus)
        for issue, (reproduced, not_reproduced) in other.known_issues.items():
            self.known_issues[issue][0] += reproduced
            self.known_issues[issue][1] += not_reproduced
        if other.first_failure and (
            not self.first_failure or other.first_failure["after_s"] < self.first_failure["after_s"]
        ):
            self.first_failure = other.first_failure
