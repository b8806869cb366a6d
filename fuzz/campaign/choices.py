"""The values of the harness's enumerated options, and its defaults; no torch here: the pytest plugin declares its
options from these before anything heavy is imported."""

DEVICE_CHOICES = ("auto", "cpu", "cuda")
CONVERTER_CHOICES = ("fixed", "stock", "both")
# xfail: specs a known issue matches run and count as reproduced or not (only those of a slow entry, whose cost is
# the problem, are not run); check: as xfail, and each registry entry's own spec is re-tested. exclude: the name older
# runs recorded for what is now xfail (a replay of such a run passes it on).
KNOWN_ISSUE_MODES = ("xfail", "check", "exclude")
# Test items a campaign is split into per family, spread over the workers.
DEFAULT_SHARDS = 8
