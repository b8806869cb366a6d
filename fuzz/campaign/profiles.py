"""The Hypothesis profiles of the harness. Counts are per test item: the campaign has `--fuzz-shards` items."""

from __future__ import annotations

import math
import random

import hypothesis.core
import hypothesis.internal.conjecture.engine
from hypothesis import HealthCheck, Phase, settings
from hypothesis.database import ExampleDatabase

PROFILES = ("ci", "dev", "nightly", "replay")


def register_profiles(database: ExampleDatabase) -> None:
    """Register ``ci``, ``dev``, ``nightly`` and ``replay``, all on ``database`` (see `fuzz.campaign.database`), and
    lift Hypothesis's own cap on shrinking time (`lift_shrinking_time_cap`).

    Each is built on Hypothesis's ``default`` profile, not on the current one: with the CI
    environment variable set, the current one is Hypothesis's built-in ``ci`` profile, whose
    ``derandomize=True`` would silently switch the database off in every profile built on it.
    """
    common = dict(
        parent=settings.get_profile("default"),
        deadline=None,  # the first call of every example compiles with thunder
        # No explain phase: it re-runs the failure many times under a line tracer, which makes
        # thunder's Python interpreter crawl (minutes) for a report our repro.py makes redundant.
        phases=(Phase.explicit, Phase.reuse, Phase.generate, Phase.target, Phase.shrink),
        # large_base_example: our smallest network is one small layer; the check fires only when the
        # campaign's budget ran out by the time Hypothesis tries it (every call then overruns), which
        # happens after the database's examples are replayed, at whatever point the budget ends.
        suppress_health_check=[
            HealthCheck.too_slow,
            HealthCheck.filter_too_much,
            HealthCheck.data_too_large,
            HealthCheck.large_base_example,
        ],
        print_blob=True,
        report_multiple_bugs=True,
    )
    lift_shrinking_time_cap()
    # ci: derandomized (Hypothesis then allows no database) and small.
    settings.register_profile("ci", max_examples=4, derandomize=True, database=None, **common)
    settings.register_profile("dev", max_examples=25, derandomize=False, database=database, **common)
    # nightly: effectively unbounded; --fuzz-minutes sets the real budget.
    settings.register_profile("nightly", max_examples=1_000_000, derandomize=False, database=database, **common)
    # replay: only what the database holds, nothing new.
    settings.register_profile(
        "replay",
        parent=settings(max_examples=1, database=database, **common),
        phases=(Phase.explicit, Phase.reuse, Phase.shrink),
    )


def lift_shrinking_time_cap() -> None:
    """Let a failure shrink until Hypothesis's shrinker is done (its own count of shrinks still bounds it), however
    long that takes.

    Hypothesis stops shrinking after 300 s (``MAX_SHRINKING_SECONDS``) and reports what it has, a network that is
    not minimal, as if shrunk: on a loaded machine (a thunderfx compile per shrink step) that cut a self-test's tanh
    fault at seq=1 instead of the minimal network. How long shrinking may take is the campaign's budget's to decide
    (`fuzz.campaign.budget`: it keeps a finding unshrunk and says so); without a budget (``--fuzz-minutes``), as in
    a replay, nothing limits its time. (hypothesis 6.1xx internals, read at each shrink's start, guarded by
    tests/unit/test_profiles.py.)
    """
    hypothesis.internal.conjecture.engine.MAX_SHRINKING_SECONDS = math.inf


def seed_generation(value: int) -> None:
    """Make Hypothesis's generation for the next test reproducible from ``value``, keeping the database.

    ``@seed`` (and ``--hypothesis-seed``) would turn the example database off; an unseeded test
    draws its randomness from this thread-local Random instead (hypothesis 6.1xx internals,
    guarded by tests/unit/test_profiles.py).
    """
    hypothesis.core.threadlocal._hypothesis_global_random = random.Random(value)
