"""A campaign's statistics (`CampaignStats`): what each process counted, merged for the summary and report."""

from __future__ import annotations

import math
import statistics
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import Field, dataclass, field, fields
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


@dataclass(frozen=True)
class _Rule:
    """How a statistic starts (``empty``), is written to and read from summary.json (``dump``, ``load``) and merges
    with another process's (``merge``: a new value from both)."""

    empty: Callable[[], Any]
    dump: Callable[[Any], Any]
    load: Callable[[Any], Any]
    merge: Callable[[Any, Any], Any]


def _identity(value: Any) -> Any:
    return value


def _tally_sum(a: dict, b: dict) -> Counter:
    """``a`` and ``b`` added, keys whose count is 0 kept (a region's reasons of 0 bytes are still its reasons)."""
    total = Counter(a)
    total.update(b)
    return total


def _sorted_dict(mapping: dict) -> dict:
    return dict(sorted(mapping.items()))


def _counts(n: int) -> _Rule:
    """Per key, ``n`` counts added element-wise (a record with fewer, from an older run, is padded with zeros)."""
    return _Rule(
        empty=lambda: defaultdict(lambda: [0] * n),
        dump=_sorted_dict,
        load=lambda data: defaultdict(lambda: [0] * n, {key: [*counts, *[0] * n][:n] for key, counts in data.items()}),
        merge=lambda ours, theirs: defaultdict(
            lambda: [0] * n,
            {
                key: [a + b for a, b in zip(ours.get(key, [0] * n), theirs.get(key, [0] * n), strict=True)]
                for key in {*ours, *theirs}
            },
        ),
    )


def _bound(pick: Callable[..., Any], key: Callable[[Any], Any] | None = None) -> Callable[[Any, Any], Any]:
    """``pick`` (min or max, by ``key``) of two optional values: the one that is not None, or None."""
    return lambda ours, theirs: pick((v for v in (ours, theirs) if v is not None), key=key, default=None)


COUNT = _Rule(int, _identity, _identity, lambda a, b: a + b)
SECONDS = _Rule(float, lambda seconds: round(seconds, 3), _identity, lambda a, b: a + b)
TALLY = _Rule(Counter, _sorted_dict, Counter, lambda a, b: a + b)
TALLIES = _Rule(  # per key, a tally
    lambda: defaultdict(Counter),
    lambda tallies: {key: _sorted_dict(tally) for key, tally in sorted(tallies.items())},
    lambda data: defaultdict(Counter, {key: Counter(tally) for key, tally in data.items()}),
    lambda a, b: defaultdict(Counter, {key: _tally_sum(a.get(key, {}), b.get(key, {})) for key in {*a, *b}}),
)
LISTS = _Rule(  # per key, a list
    lambda: defaultdict(list),
    _sorted_dict,
    lambda data: defaultdict(list, data),
    lambda a, b: defaultdict(list, {key: [*a.get(key, []), *b.get(key, [])] for key in {*a, *b}}),
)
LIST = _Rule(list, _identity, list, lambda a, b: [*a, *b])
MAPPING = _Rule(dict, _sorted_dict, dict, lambda a, b: {**a, **b})
EARLIEST_PER_KEY = _Rule(dict, _sorted_dict, dict, lambda a, b: {k: _bound(min)(a.get(k), b.get(k)) for k in {*a, *b}})
EARLIEST_START = _Rule(lambda: None, _identity, _identity, _bound(min))
LATEST_END = _Rule(lambda: None, _identity, _identity, _bound(max))
FIRST_FAILURE = _Rule(lambda: None, _identity, _identity, _bound(min, key=lambda failure: failure["after_s"]))
# startup_s and first_example_s are one measurement (the earliest process's): merged together, in `merge`.
PAIRED_WITH_STARTUP = _Rule(lambda: None, _identity, _identity, lambda a, b: a)


def stat(rule: _Rule, key: str | None = None) -> Any:
    """A `CampaignStats` field kept by ``rule``, written to summary.json as ``key`` (default: the field's name)."""
    return field(default_factory=rule.empty, metadata={"rule": rule, "key": key})


@dataclass
class CampaignStats:
    """Counters of one process's examples; merged across xdist workers for the summary. Each field's rule
    (`stat`) says how it is written to summary.json, read back and merged: `to_dict`, `from_dict` and `merge` derive
    from them."""

    examples: int = stat(COUNT)
    valid: int = stat(COUNT)
    compiled: int = stat(COUNT, "compiled_by_thunder")
    fell_back: int = stat(COUNT)
    seconds: float = stat(SECONDS)
    repeats: int = stat(COUNT)  # Hypothesis calls answered from memory (a network the shard had already run)
    timeout_reruns: int = stat(COUNT)  # thunderfx runs over the time limit, run once more before counting a time-out
    converter_comparisons: int = stat(COUNT)
    converter_disagreements: int = stat(COUNT)  # verdict or any value differs
    converter_verdict_changes: int = stat(COUNT)
    failing_examples: Counter = stat(TALLY, "failing_examples_by_class")
    invalid_reasons: Counter = stat(TALLY)
    coverage: Counter = stat(TALLY)  # trait (see fuzz.generate.coverage) -> examples run with it
    fell_back_coverage: Counter = stat(TALLY)  # trait -> valid examples thunder fell back on
    first_failure: dict[str, Any] | None = stat(FIRST_FAILURE)
    failures: list[dict[str, Any]] = stat(LIST)
    # known issue id -> [examples where it reproduced, examples where it did not]
    known_issues: defaultdict[str, list[int]] = stat(_counts(2))
    known_issue_checks: dict[str, str] = stat(MAPPING)  # id -> verdict of --known-issues check
    discarded: int = stat(COUNT)  # drawn specs not run: a known issue they match is slow (its cost is the problem)
    discarded_reasons: Counter = stat(TALLY)  # id of the slow issue -> specs not run for it
    known_class_failures: int = stat(COUNT)  # failing examples that matched a known issue's signature inside its band
    known_resembling_failures: int = stat(COUNT)  # failing examples of a known issue's class outside its signature
    known_explained_failures: int = stat(COUNT)  # of those, the ones that went away without the issue's trigger
    # Failing examples that pass on thunder with the known fixes applied, by the entries credited ("a + b": a chain)
    known_by_fix: Counter = stat(TALLY)
    fix_rejudge_s: float = stat(SECONDS)  # seconds spent judging failures again under the fixes
    # "<op> <form>" of op layers inside checkpoints -> [examples thunder compiled them in, fell back, failed]
    op_coverage: defaultdict[str, list[int]] = stat(_counts(3))
    op_split_reasons: defaultdict[str, Counter] = stat(TALLIES)
    op_first_compiled_s: dict[str, float] = stat(EARLIEST_PER_KEY)  # op -> campaign time it first compiled
    # "<op>\t<axis>\t<value class>" of varied op calls inside checkpoints (fuzz.generate.axes) -> [compiled, fell
    # back, thunder failed before it reported a compile: a crash or a time-out]
    op_axis_coverage: defaultdict[str, list[int]] = stat(_counts(3))
    # "<layer kind or op>\t<checkpoint api>\t<dtype>" -> [valid examples thunder compiled it in a checkpoint, fell back]
    checkpoint_grid: defaultdict[str, list[int]] = stat(_counts(2))
    # "<dtype>\t<thunder|eager>\t<decade>" -> valid examples whose largest relative error vs the float64 reference
    # (`Outcome.discrepancy`, `Outcome.eager_error`) lies in [10**decade, 10**(decade+1)); the lowest decade holds 0
    error_decades: Counter = stat(TALLY)
    # region kind (`fuzz.generate.coverage.region_kind`) -> [thunderfx's, eager's bytes saved for backward] per valid
    # example with checkpoints that thunder ran (`fuzz.judge.memory`)
    saved_bytes: defaultdict[str, list] = stat(LISTS)
    # region kind -> bytes thunderfx's forwards saved for backward by reason (`fuzz.run.regions`), summed over the same
    # examples, and "eager" what eager's checkpointed networks saved
    saved_reasons: defaultdict[str, Counter] = stat(TALLIES)
    timeline: Counter = stat(TALLY)  # epoch second (a multiple of 10) -> examples finished in it
    gpus: dict[str, str] = stat(MAPPING)  # xdist worker -> the CUDA_VISIBLE_DEVICES it was pinned to
    batched: int = stat(COUNT)  # examples judged in a batch (`fuzz.judge.batch`: their memory contract not checked)
    sent_alone: int = stat(COUNT)  # members of a batch run alone after it: they failed there, or it did not finish
    # Seconds from the command's start to the first example's start (the earliest process's: imports, collection,
    # workers' start), and what that example took (thunder's and inductor's one-off set-up included).
    startup_s: float | None = stat(PAIRED_WITH_STARTUP)
    first_example_s: float | None = stat(PAIRED_WITH_STARTUP)
    # When the first of the campaign's test items started and the last ended (time.time(), over all processes): the
    # campaign's own time, which a pytest session that also runs other tests (`make test`) does not count.
    items_started_at: float | None = stat(EARLIEST_START)
    items_ended_at: float | None = stat(LATEST_END)

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
        return {_key(f): _rule(f).dump(getattr(self, f.name)) for f in fields(self)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CampaignStats:
        """The statistics ``to_dict`` wrote (a key an older run lacks starts empty); a KeyError if ``data`` is not
        a campaign's statistics (no ``examples``)."""
        if "examples" not in data:
            raise KeyError("examples: not a campaign's statistics")
        return cls(**{f.name: _rule(f).load(data[_key(f)]) for f in fields(cls) if data.get(_key(f)) is not None})

    def merge(self, other: CampaignStats) -> None:
        """Add ``other`` process's statistics to these."""
        earlier_start = other.startup_s is not None and (self.startup_s is None or other.startup_s < self.startup_s)
        for f in fields(self):
            setattr(self, f.name, _rule(f).merge(getattr(self, f.name), getattr(other, f.name)))
        if earlier_start:
            self.startup_s, self.first_example_s = other.startup_s, other.first_example_s


def _rule(statistic: Field) -> _Rule:
    return statistic.metadata["rule"]


def _key(statistic: Field) -> str:
    return statistic.metadata["key"] or statistic.name


def saved_ratios(saved_bytes: dict[str, list]) -> dict[str, dict[str, Any]]:
    """Per region kind, the ratio of thunderfx's to eager's bytes saved for backward (both with checkpoints; 1 where
    both save nothing, inf where only thunderfx does): how many examples, the median and the worst (`CampaignStats`)."""
    ratios = {}
    for kind, pairs in sorted(saved_bytes.items()):
        values = sorted(t / e if e else (1.0 if not t else math.inf) for t, e in pairs)
        ratios[kind] = {"examples": len(values), "median": statistics.median(values), "worst": values[-1]}
    return ratios
