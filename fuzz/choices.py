"""The values of the harness's enumerated options; no torch here: the pytest plugin declares its options from these
before anything heavy is imported."""

DEVICE_CHOICES = ("auto", "cpu", "cuda")
CONVERTER_CHOICES = ("fixed", "stock", "both")
# exclude: specs a known issue matches are not run; xfail: they run and count as reproduced or
# not; check: as xfail, and each registry entry's own spec is re-tested.
KNOWN_ISSUE_MODES = ("exclude", "xfail", "check")
