"""A campaign's statistics (`CampaignStats`): what each process counted, merged for the summary and report."""

from __future__ import annotations

import math
import statistics
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from fuzz.generate.coverage import region_kind, traits

if TYPE_CHECKING:  # (not at run time: the report and the command line import no torch)
    from fuzz.judge.outcome import Outcome


def op_key(params: dict[str, Any]) -> str:
    """An op layer's coverage cell: its op and call form."""
    return f"{params['op']} {params.get('form', 'module')}"


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
class Confirmation:
    """A failure's repro.py run in a fresh interpreter (``confirmed`` None: not run, ``how`` says why)."""

    confirmed: bool | None
    how: str
    seconds: float = 0.0


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
    coverage: Counter = field(default_factory=Counter)  # trait (see fuzz.generate.coverage) -> examples run with it
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
    # Failing examples that pass on thunder with the known fixes applied, by the entries credited ("a + b": a chain)
    known_by_fix: Counter = field(default_factory=Counter)
    fix_rejudge_s: float = 0.0  # seconds spent judging failures again under the fixes
    # "<op> <form>" of op layers inside checkpoints -> [examples thunder compiled them in, fell back, failed]
    op_coverage: defaultdict[str, list[int]] = field(default_factory=lambda: defaultdict(lambda: [0, 0, 0]))
    op_split_reasons: defaultdict[str, Counter] = field(default_factory=lambda: defaultdict(Counter))
    op_first_compiled_s: dict[str, float] = field(default_factory=dict)  # op -> campaign time it first compiled
    # "<op>\t<axis>\t<value class>" of varied op calls inside checkpoints (fuzz.generate.axes) -> [compiled, fell back,
    # thunder failed before it reported a compile: a crash or a time-out]
    op_axis_coverage: defaultdict[str, list[int]] = field(default_factory=lambda: defaultdict(lambda: [0, 0, 0]))
    # "<layer kind or op>\t<checkpoint api>\t<dtype>" -> [valid examples thunder compiled it in a checkpoint, fell back]
    checkpoint_grid: defaultdict[str, list[int]] = field(default_factory=lambda: defaultdict(lambda: [0, 0]))
    # "<dtype>\t<thunder|eager>\t<decade>" -> valid examples whose largest relative error vs the float64 reference
    # (`Outcome.discrepancy`, `Outcome.eager_error`) lies in [10**decade, 10**(decade+1)); the lowest decade holds 0
    error_decades: Counter = field(default_factory=Counter)
    # region kind (`fuzz.generate.coverage.region_kind`) -> [thunderfx's, eager's bytes saved for backward] per valid
    # example with checkpoints that thunder ran (`fuzz.judge.memory`)
    saved_bytes: defaultdict[str, list] = field(default_factory=lambda: defaultdict(list))
    # region kind -> bytes thunderfx's forwards saved for backward by reason (`fuzz.run.regions`), summed over the same
    # examples, and "eager" what eager's checkpointed networks saved
    saved_reasons: defaultdict[str, Counter] = field(default_factory=lambda: defaultdict(Counter))
    timeline: Counter = field(default_factory=Counter)  # epoch second (a multiple of 10) -> examples finished in it
    gpus: dict[str, str] = field(default_factory=dict)  # xdist worker -> the CUDA_VISIBLE_DEVICES it was pinned to
    # Seconds from the command's start to the first example's start (the earliest process's: imports, collection,
    # workers' start), and what that example took (thunder's and inductor's one-off set-up included).
    batched: int = 0  # examples judged in a batch (`fuzz.judge.batch`: their memory contract not checked)
    sent_alone: int = 0  # members of a batch run alone after it: they failed there, or the batch did not finish
    startup_s: float | None = None
    first_example_s: float | None = None
    # When the first of the campaign's test items started and the last ended (time.time(), over all processes): the
    # campaign's own time, which a pytest session that also runs other tests (`make test`) does not count.
    items_started_at: float | None = None
    items_ended_at: float | None = None

    def item_started(self) -> None:
        """A campaign test item starts in this process."""
        self.items_started_at = self.items_started_at or time.time()

    def item_ended(self) -> None:
        """A campaign test item ended in this process."""
        self.items_ended_at = time.time()

    @property
    def items_seconds(self) -> float | None:
        """Seconds from the first campaign item's start to the last one's end (None before one ended)."""
        if self.items_started_at is None or self.items_ended_at is None:
            return None
        return self.items_ended_at - self.items_started_at

    def record(self, outcome: Outcome, elapsed_s: float, expected: bool = False) -> None:
        """Count ``outcome``, ``elapsed_s`` into the campaign; ``expected``: it is a known issue's failure."""
        if self.startup_s is None:
            self.startup_s, self.first_example_s = round(elapsed_s - outcome.seconds, 2), round(outcome.seconds, 2)
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
            if mutation := layer.params.get("mutation"):
                cell = f"{layer.params['op']}\t{mutation['axis']}\t{mutation['class']}"
                reported = outcome.compile_report is not None  # (a known issue's failure counts too)
                if reported or outcome.failure is not None:
                    self.op_axis_coverage[cell][0 if outcome.compiled else 1 if reported else 2] += 1
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
        if outcome.saved_bytes is not None and (kind := region_kind(spec)):
            self.saved_bytes[kind].append(list(outcome.saved_bytes))
            if (regions := outcome.compile_report.regions) is not None:
                self.saved_reasons[kind].update({**regions.saved, "eager": outcome.saved_bytes[1]})
        # Both against the float64 reference (a random network has none; a crash has no error to count).
        if outcome.eager_error is not None and (outcome.failure is None or outcome.discrepancy):
            self.error_decades[f"{spec.dtype}\tthunder\t{_decade(outcome.discrepancy)}"] += 1
            self.error_decades[f"{spec.dtype}\teager\t{_decade(outcome.eager_error)}"] += 1

    def record_final_failure(
        self, record: dict[str, Any], elapsed_s: float, confirmation: Confirmation | None
    ) -> dict[str, Any]:
        """A final failure's ``record`` (`fuzz.report.failures.failure_record`), ``elapsed_s`` into the campaign;
        returns the record as listed (`set_confirmation` updates it)."""
        record = {
            **record,
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
            "known_by_fix": dict(self.known_by_fix),
            "fix_rejudge_s": self.fix_rejudge_s,
            "op_coverage": dict(sorted(self.op_coverage.items())),
            "op_split_reasons": {key: dict(reasons) for key, reasons in sorted(self.op_split_reasons.items())},
            "op_first_compiled_s": self.op_first_compiled_s,
            "op_axis_coverage": dict(sorted(self.op_axis_coverage.items())),
            "checkpoint_grid": dict(sorted(self.checkpoint_grid.items())),
            "error_decades": dict(sorted(self.error_decades.items())),
            "saved_bytes": dict(sorted(self.saved_bytes.items())),
            "saved_reasons": {
                kind: dict(sorted(bytes_.items())) for kind, bytes_ in sorted(self.saved_reasons.items())
            },
            "timeline": dict(sorted(self.timeline.items())),
            "gpus": dict(sorted(self.gpus.items())),
            "batched": self.batched,
            "sent_alone": self.sent_alone,
            "startup_s": self.startup_s,
            "first_example_s": self.first_example_s,
            "items_started_at": self.items_started_at,
            "items_ended_at": self.items_ended_at,
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
            known_by_fix=Counter(data.get("known_by_fix", {})),
            fix_rejudge_s=data.get("fix_rejudge_s", 0.0),
            known_class_failures=data.get("known_class_failures", 0),
            known_resembling_failures=data.get("known_resembling_failures", 0),
            known_explained_failures=data.get("known_explained_failures", 0),
            op_coverage=defaultdict(lambda: [0, 0, 0], data.get("op_coverage", {})),
            op_split_reasons=defaultdict(
                Counter, {key: Counter(reasons) for key, reasons in data.get("op_split_reasons", {}).items()}
            ),
            op_first_compiled_s=dict(data.get("op_first_compiled_s", {})),
            op_axis_coverage=defaultdict(  # (a run before thunder's failures were counted: two counts)
                lambda: [0, 0, 0], {key: [*counts, 0][:3] for key, counts in data.get("op_axis_coverage", {}).items()}
            ),
            checkpoint_grid=defaultdict(lambda: [0, 0], data.get("checkpoint_grid", {})),
            error_decades=Counter(data.get("error_decades", {})),
            batched=data.get("batched", 0),
            sent_alone=data.get("sent_alone", 0),
            startup_s=data.get("startup_s"),
            first_example_s=data.get("first_example_s"),
            items_started_at=data.get("items_started_at"),
            items_ended_at=data.get("items_ended_at"),
            saved_bytes=defaultdict(list, data.get("saved_bytes", {})),
            saved_reasons=defaultdict(Counter, {k: Counter(v) for k, v in data.get("saved_reasons", {}).items()}),
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
            "fix_rejudge_s",
            "batched",
            "sent_alone",
        ):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        for key, counts in other.op_coverage.items():
            self.op_coverage[key] = [a + b for a, b in zip(self.op_coverage[key], counts, strict=True)]
        for key, reasons in other.op_split_reasons.items():
            self.op_split_reasons[key] += reasons
        for grid, theirs in (
            (self.checkpoint_grid, other.checkpoint_grid),
            (self.op_axis_coverage, other.op_axis_coverage),
        ):
            for key, counts in theirs.items():
                grid[key] = [a + b for a, b in zip(grid[key], counts, strict=True)]
        self.error_decades += other.error_decades
        for kind, pairs in other.saved_bytes.items():
            self.saved_bytes[kind] += pairs
        for kind, bytes_ in other.saved_reasons.items():
            self.saved_reasons[kind].update(bytes_)
        self.timeline += other.timeline
        for op, seconds in other.op_first_compiled_s.items():
            self.op_first_compiled_s[op] = min(seconds, self.op_first_compiled_s.get(op, seconds))
        self.failing_examples += other.failing_examples
        self.invalid_reasons += other.invalid_reasons
        self.discarded_reasons += other.discarded_reasons
        self.known_by_fix += other.known_by_fix
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
        starts = [t for t in (self.items_started_at, other.items_started_at) if t is not None]
        ends = [t for t in (self.items_ended_at, other.items_ended_at) if t is not None]
        self.items_started_at, self.items_ended_at = min(starts, default=None), max(ends, default=None)
        if other.startup_s is not None and (self.startup_s is None or other.startup_s < self.startup_s):
            self.startup_s, self.first_example_s = other.startup_s, other.first_example_s


def saved_ratios(saved_bytes: dict[str, list]) -> dict[str, dict[str, Any]]:
    """Per region kind, the ratio of thunderfx's to eager's bytes saved for backward (both with checkpoints; 1 where
    both save nothing, inf where only thunderfx does): how many examples, the median and the worst (`CampaignStats`)."""
    ratios = {}
    for kind, pairs in sorted(saved_bytes.items()):
        values = sorted(t / e if e else (1.0 if not t else math.inf) for t, e in pairs)
        ratios[kind] = {"examples": len(values), "median": statistics.median(values), "worst": values[-1]}
    return ratios
