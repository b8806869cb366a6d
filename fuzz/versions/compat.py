"""Which torch / lightning-thunder pairs the harness can trust, checked before any example runs."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

from packaging.version import Version

VERIFIED = {"torch": "2.9.1", "lightning-thunder": "0.2.6"}
# Measured on CPU (`fuzz.versions.thunder_versions.probe` and six known-issue repros, same verdicts as with torch
# 2.9.1): torch 2.10.0 and 2.11.0 run lightning-thunder 0.2.6 and 0.2.7.dev20260201 as well; with 0.2.6, torch 2.12.1
# fails at run time and 2.13 at import. `--thunder` probes any other pair before a run.


def incompatibility() -> str | None:
    """A one-line reason why the installed pair cannot run the harness, or None when it can."""
    try:
        torch_version = Version(version("torch"))
        thunder_version = Version(version("lightning-thunder"))
    except PackageNotFoundError as missing:
        pins = f"torch {VERIFIED['torch']}, lightning-thunder {VERIFIED['lightning-thunder']}"
        return f"{missing.name} is not installed; run `make setup` (pins {pins})"
    if thunder_version <= Version("0.2.6") and torch_version.release[:2] >= (2, 12):
        return (
            f"torch {torch_version} is incompatible with lightning-thunder {thunder_version} "
            f"(thunderfx fails at run time from torch 2.12, import fails from 2.13); "
            f"install torch=={VERIFIED['torch']} (`make setup`)"
        )
    return None
