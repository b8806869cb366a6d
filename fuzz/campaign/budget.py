"""One test item's (shard's) share of a campaign's wall-clock budget, and the time limit of its examples."""

from __future__ import annotations

import time

from fuzz.judge.oracle import ExampleTimeout
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


class ItemBudget:
    """The budget (``minutes``) split over the campaign's test items (`set_items`: the op sweep's sized by its cases,
    the others evenly), ``items / workers`` of which each process runs, so one process or an xdist fleet ends near
    the budget; and what the current item found so far, which decides whether it may go on and how long its examples
    may take."""

    def __init__(self, minutes: float | None, workers: int, timeout_s: float | None) -> None:
        self._minutes, self._workers, self._timeout_s = minutes, workers, timeout_s
        self._item_s: float | None = None
        self._sweep_item_s: float | None = None
        self.deadline = float("inf")
        self.failures: list[Outcome] = []  # this item's unexpected failures (the campaign appends them)
        self._validity = [0, 0]  # this item's examples: valid, invalid

    def set_items(self, items: int, sweep_items: int = 0, sweep_cases: int = 0) -> None:
        """The campaign has ``items`` test items (all families' shards) to share the budget, ``sweep_items`` of them the
        op sweep's, which runs ``sweep_cases`` cases in all: those get what the cases need (`SWEEP_CASE_S` each), at
        most `SWEEP_MAX_SHARE` of the budget; the other items share the rest evenly."""
        if self._minutes is None or not items:
            self._item_s = self._sweep_item_s = None
            return
        total_s, others = 60 * self._minutes * self._workers, items - sweep_items
        sweep_s = min(SWEEP_MAX_SHARE * total_s, SWEEP_CASE_S * sweep_cases) if others else total_s
        self._sweep_item_s = sweep_s / sweep_items if sweep_items else None
        self._item_s = (total_s - sweep_s) / others if others else None

    def start_item(self, sweep: bool = False) -> None:
        """A new test item starts (``sweep``: one of the op sweep's): it gets its share of the budget, and nothing
        found before counts."""
        self.failures.clear()
        self._validity = [0, 0]
        if (item_s := self._sweep_item_s if sweep else self._item_s) is not None:
            self.deadline = time.monotonic() + item_s

    def count(self, outcome: Outcome) -> None:
        """Count an example of the current item as valid or not."""
        self._validity[not outcome.valid] += 1

    def spent(self) -> bool:
        """Whether the current item's share is used up."""
        return time.monotonic() >= self.deadline

    def may_generate(self) -> bool:
        """False once the current item's share is spent, unless it has found a failure (its shrinking goes on)."""
        return bool(self.failures) or not self.spent()

    def found_only_invalid_networks(self) -> bool:
        """The current item ran examples and every one of them was invalid (a harness that rejects everything)."""
        return self._validity[1] > 0 and not self._validity[0]

    def example_timeout_s(self) -> float | None:
        """The per-example limit: once the item found a failure (not a timeout), a few times its slowest failure.

        A shrinking step far slower than the failure being shrunk is a different behaviour (thunder's
        slow error paths take minutes); paying the full limit on each such step would stall shrinking.
        """
        limit, failures = self._timeout_s, self.failures
        if not failures or any(isinstance(o.failure, ExampleTimeout) for o in failures) or limit is None:
            return limit
        return min(limit, max(SHRINKING_TIMEOUT_FLOOR_S, SHRINKING_TIMEOUT_FACTOR * max(o.seconds for o in failures)))
