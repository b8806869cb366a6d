"""The profiles keep their database whatever profile is current when they are registered (CI sets one)."""

from hypothesis import Phase, settings
from hypothesis.database import DirectoryBasedExampleDatabase

from fuzz.profiles import register_profiles


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
