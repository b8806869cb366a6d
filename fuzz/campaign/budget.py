"""One test item's (shard's) share of a campaign's wall-clock budget, and the time limit of its examples.

``--fuzz-minutes N`` is wall time from the command's start to its summary: every process ends at the same end
(`ItemBudget.end`), whatever its items' shares say, with time reserved for what ends the run (the summary, the report)
and for what finishes a finding (the reduction, the confirmation); no thunderfx run of an example's verdict starts
after the end or runs past it (`ItemBudget.end` is the verdict's deadline, `fuzz.judge.verdict.check_spec`: a verdict it
cuts short is none), and a finding whose shrinking would run past it has Hypothesis's shrinking cut short, is
reduced in what is left (`REDUCING_S`), and is listed as unshrunk.
"""

from __future__ import annotations

import math
import time

from fuzz.judge.failures import ExampleTimeout
from fuzz.judge.outcome import Outcome

SHRINKING_TIMEOUT_FLOOR_S = 30.0
SHRINKING_TIMEOUT_FACTOR = 4.0
# The op sweep's items share at most this part of the campaign: the sweep is what covers every (op, argument axis)
# pair, its cases ordered so that a part of it covers them all once; random composition gets the rest.
SWEEP_MAX_SHARE = 0.5
# What one sweep case costs on this machine (a thunderfx compile of one op in one checkpoint): mean 1.97 s, median
# 1.4 s over a 93-case slice (docs/op-axes.md); the sweep's share is sized by it, so a small sweep (a few ops)
# leaves the rest of the budget to the random families.
SWEEP_CASE_S = 2.0
# Reserved at the end of the budget for what ends the run after the last example (workers' teardown, the summary,
# report.html); before that, FINISHING_S in which Hypothesis no longer shrinks but the spec-level reduction and the
# confirmation (a fresh interpreter: thunder's import, a compile, upstream.py: 15-25 s measured) of what was shrunk
# still run.
CLOSING_S = 10.0
FINISHING_S = 30.0
# Hypothesis's shrinking of a finding stops this long before its end (the item's shrinking time, or FINISHING_S before
# the budget's), left to the spec-level reduction (`fuzz.campaign.findings`), whose wall-clock bound it is too (each
# check compiles the network twice, the network then its triage: measured on the new-kinds campaign, 50 checks took
# minutes per failure and a 2-minute budget ran for 10 minutes with a dozen distinct failures). The reduction deletes
# whole layers and rewires their readers, which Hypothesis's shrinker of the draw's choices reaches slowly or not at
# all. Measured in the program fault self-tests (5-minute campaigns): a clone-update finding at 71 s that Hypothesis
# still shrank at 260 s, cut short there and kept at 7 layers, unreduced; with this reserve, an aliased-inputs finding
# at 184 s, cut short at 200 s, was reduced to its 2 layers by 211 s (on a loaded machine).
REDUCING_S = 60.0
# While other items are still to come, a finding's shrinking takes at most SHRINKING_ITEM_SHARES times the share each
# of them would get then, and at most SHRINKING_SHARE of what is left (or the rest of its own item's share, if more);
# then it is cut short. Measured: in a 20-minute run two model-zoo findings shrank for 450-550 s on both workers at
# once, and the last two architectures and 23 items got no example at all.
SHRINKING_ITEM_SHARES = 4.0
SHRINKING_SHARE = 0.5


class ItemBudget:
    """The budget (``minutes``) split over the campaign's test items (`set_items`: the op sweep's sized by its cases,
    the others evenly), ``items / workers`` of which each process runs, so one process or an xdist fleet ends near
    the budget; and what the current item found so far, which decides whether it may go on and how long its examples
    may take."""

    def __init__(
        self, minutes: float | None, workers: int, timeout_s: float | None, started_at: float | None = None
    ) -> None:
        """``started_at``: when the command started (`time.time`; default now): the budget ends ``minutes`` after."""
        self._minutes, self._workers, self._timeout_s = minutes, workers, timeout_s
        # The ends, on this process's monotonic clock.
        ago = time.time() - (started_at or time.time())
        self.end = float("inf") if minutes is None else time.monotonic() - ago + 60 * minutes - CLOSING_S
        self.cut_short = 0  # 1 once the end of the budget cut this item's shrinking short
        self._sweep_item_s: float | None = None
        self._items: tuple[float, float] | None = None  # `set_items`: the sweep's items, the others' weights
        self._started = [0.0, 0.0]
        self.deadline = float("inf")
        self._others_to_come = 0.0  # items (weights) not started yet, when the current one started
        self._shrink_until: float | None = None  # the current item's end of shrinking, set at its first failure
        self.failures: list[Outcome] = []  # this item's unexpected failures (the campaign appends them)
        self._validity = [0, 0]  # this item's examples: valid, invalid

    def set_items(self, items: float, sweep_items: int = 0, sweep_cases: int = 0) -> None:
        """The campaign has ``items`` test items (all families' shards, each weighted, `start_item`) to share what is
        left of the budget, ``sweep_items`` of them the op sweep's, which runs ``sweep_cases`` cases in all: those get
        what the cases need (`SWEEP_CASE_S` each), at most `SWEEP_MAX_SHARE` of the budget; the other items share the
        rest evenly: each, as it starts, its part of what all processes have left for the items not started yet, so
        that an item that overran shortens the later ones, not the run."""
        if self._minutes is None or not items:
            self._sweep_item_s, self._items = None, None
            return
        total_s, others = max(0.0, self.left_s()) * self._workers, items - sweep_items
        sweep_s = min(SWEEP_MAX_SHARE * total_s, SWEEP_CASE_S * sweep_cases) if others else total_s
        self._sweep_item_s = sweep_s / sweep_items if sweep_items else None
        self._items = (sweep_items, others)
        self._started = [0.0, 0.0]  # this process's: sweep items, the others' weights

    def start_item(self, sweep: bool = False, weight: float = 1.0, started: tuple[float, float] | None = None) -> None:
        """A new test item starts (``sweep``: one of the op sweep's): it gets its share of the budget (``weight`` times
        an item's), and nothing found before counts. ``started``: the sweep's items and the other items' weights that
        all processes started so far, this one included (`fuzz.report.run_folder.RunFolder.mark_item_started`; default:
        this process's alone)."""
        self.failures.clear()
        self._validity = [0, 0]
        self.cut_short = 0
        self._shrink_until = None
        if self._items is None:
            return
        self._started[0 if sweep else 1] += 1 if sweep else weight
        sweeps_started, others_started = started or self._started
        if sweep:
            share = self._sweep_item_s or 0.0
        else:
            # What the sweep's items not started yet need; this item's weight and the rest's.
            sweeping_s = max(0.0, self._items[0] - sweeps_started) * (self._sweep_item_s or 0.0)
            to_come = max(weight, self._items[1] - others_started + weight)
            share = weight * max(0.0, self.left_s() * self._workers - sweeping_s) / to_come
        self._others_to_come = max(0.0, self._items[0] - sweeps_started) + max(0.0, self._items[1] - others_started)
        self.deadline = min(time.monotonic() + share, self.end)

    def count(self, outcome: Outcome, cut: bool = False) -> None:
        """Count an example of the current item as valid or not (not at all when ``cut``: its verdict was cut short or
        its limit shortened while shrinking)."""
        if not cut:
            self._validity[not outcome.valid] += 1

    def spent(self) -> bool:
        """Whether the current item's share is used up."""
        return time.monotonic() >= self.deadline

    def may_generate(self) -> bool:
        """False once the current item's share is spent, unless it has found a failure: its shrinking goes on until
        `FINISHING_S` before the end of the budget, and while items are still to come for at most what
        `SHRINKING_ITEM_SHARES` and `SHRINKING_SHARE` allow from when it was found, `REDUCING_S` before either end
        left to its reduction; then it is cut short (`cut_short`: this item's finding is reduced in what is left and
        listed as unshrunk)."""
        if not self.failures:
            return not self.spent()
        now = time.monotonic()
        if self._shrink_until is None:
            self._shrink_until = now + self._shrinking_s(now)
        if self.left_s() > FINISHING_S + REDUCING_S and now < self._shrink_until - REDUCING_S:
            return True
        self.cut_short = 1
        return False

    def _shrinking_s(self, now: float) -> float:
        """How long a failure the current item found at ``now`` may shrink (inf: nothing is to come)."""
        if not self._others_to_come:
            return math.inf
        left = max(0.0, self.left_s())
        their_share = left * self._workers / (self._others_to_come + 1)
        return max(self.deadline - now, min(SHRINKING_SHARE * left, SHRINKING_ITEM_SHARES * their_share))

    def room_for(self, seconds: float) -> bool:
        """Whether ``seconds`` more fit before the end of the budget (always without one)."""
        return self._minutes is None or seconds <= self.left_s()

    def left_s(self) -> float:
        """Seconds until the budget ends, its closing reserve taken out (inf without a budget)."""
        return self.end - time.monotonic()

    def found_only_invalid_networks(self) -> bool:
        """The current item ran examples and every one of them was invalid (a harness that rejects everything)."""
        return self._validity[1] > 0 and not self._validity[0]

    def example_timeout_s(self) -> float | None:
        """The per-example limit (`shrinking_timeout_s`), never past the end of the budget (`capped`)."""
        return self.capped(self.shrinking_timeout_s())

    def shrinking_timeout_s(self) -> float | None:
        """The campaign's per-example limit; once the item found a failure (not a timeout), a few times its slowest
        failure.

        A shrinking step far slower than the failure being shrunk is a different behaviour (thunder's
        slow error paths take minutes); paying the full limit on each such step would stall shrinking.
        """
        limit, failures = self._timeout_s, self.failures
        if not failures or any(isinstance(o.failure, ExampleTimeout) for o in failures) or limit is None:
            return limit
        return min(limit, max(SHRINKING_TIMEOUT_FLOOR_S, SHRINKING_TIMEOUT_FACTOR * max(o.seconds for o in failures)))

    def capped(self, limit: float | None) -> float | None:
        """``limit`` cut to what is left of the budget (at least a second): what a process running an example records
        as its limit (the hard limit on a hung worker), and a batch's limit."""
        if self._minutes is None:
            return limit
        return min(limit or float("inf"), max(1.0, self.left_s()))
