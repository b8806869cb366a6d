"""The profiles keep their database whatever profile is current when they are registered (CI sets one), and a failure
shrinks until it is minimal (no cap of Hypothesis's on shrinking time)."""

import time

import hypothesis.internal.conjecture.engine as engine
import pytest
from hypothesis import Phase, given, settings
from hypothesis import strategies as st
from hypothesis.database import DirectoryBasedExampleDatabase

from fuzz.campaign.profiles import register_profiles, seed_generation


def test_profiles_ignore_the_current_profile_and_keep_the_database(tmp_path):
    previous = settings.default
    # What Hypothesis does at import when the CI variable is set: a derandomized, database-less default.
    settings.register_profile("fuzz-selftest-ci-like", derandomize=True, database=None)
    settings.load_profile("fuzz-selftest-ci-like")
    try:
        register_profiles(DirectoryBasedExampleDatabase(tmp_path))
    finally:
        settings.register_profile("fuzz-selftest-previous", previous)
        settings.load_profile("fuzz-selftest-previous")
    for name in ("dev", "nightly", "replay"):
        profile = settings.get_profile(name)
        assert not profile.derandomize, name
        assert isinstance(profile.database, DirectoryBasedExampleDatabase), name
        assert Phase.explain not in profile.phases, name
    assert settings.get_profile("ci").derandomize and settings.get_profile("ci").database is None
    assert Phase.generate not in settings.get_profile("replay").phases


def _draws_of_a_failing_test(database) -> list[int]:
    drawn: list[int] = []

    @settings(database=database, max_examples=20)
    @given(st.integers())
    def fails_on_large(x):
        drawn.append(x)
        assert abs(x) < 10**6

    try:
        fails_on_large()
    except AssertionError:
        pass
    return drawn


def test_a_seeded_generation_repeats_and_keeps_the_database(tmp_path):
    runs = []
    for _ in range(2):
        seed_generation(1234)
        runs.append(_draws_of_a_failing_test(None)[:5])
    assert runs[0] == runs[1]
    seed_generation(1234)
    _draws_of_a_failing_test(DirectoryBasedExampleDatabase(tmp_path))
    assert list(tmp_path.rglob("*")), "the failure went to the database (@seed would have turned it off)"


def _shrunk_past_a_slow_clock() -> int:
    """The failing value a test (fails for x >= 10) shrinks to when every clock reading is 100 s after the last."""
    clock, perf_counter = iter(range(0, 10**9, 100)), time.perf_counter
    failing = []

    @settings(database=None, deadline=None, phases=(Phase.generate, Phase.shrink), max_examples=100)
    @given(st.integers(0, 10**6))
    def fails_from_10(x):
        if x >= 10:
            failing.append(x)
            raise AssertionError

    seed_generation(7)
    time.perf_counter = lambda: float(next(clock))
    try:
        with pytest.raises(AssertionError):
            fails_from_10()
    finally:
        time.perf_counter = perf_counter
    return min(failing)


def test_a_failure_shrinks_to_the_minimal_example_however_long_shrinking_takes(monkeypatch, tmp_path):
    monkeypatch.setattr(engine, "MAX_SHRINKING_SECONDS", 300)  # Hypothesis's own cap: cut after 3 slow readings
    assert _shrunk_past_a_slow_clock() > 10
    register_profiles(DirectoryBasedExampleDatabase(tmp_path))  # the campaign's set-up lifts the cap
    assert engine.MAX_SHRINKING_SECONDS == float("inf")
    assert _shrunk_past_a_slow_clock() == 10
