"""What a known bug looks like, so that a new bug never hides behind it: signatures and bands.

Each registry entry has ``known_issues/<id>/entry.toml``, recorded by ``ckpt-fuzz known-issues --record`` from the
entry's own reproductions (never typed by hand): one ``[[signature]]`` per way the bug shows (class, triage, the
crash signature of a crash, the roles of the tensors that diverge) and, per dtype, device and thunder version, the
band of its numbers over the reproductions: each diverging tensor's relative error max|Δ|/max|ref| (``error``) and
systematic scale error |α - 1| (``drift``). A failure is the entry's only when one signature matches it whole and
every diverging tensor's numbers lie inside that signature's band for the failure's dtype and device (another
device's band for the dtype until one is recorded there), widened by `MARGIN`; otherwise it is new, and
`resemblance` says how it differs. The thunder version a band was recorded on is written down, not matched:
record again after an upgrade.
"""

from __future__ import annotations

import math
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fuzz.generate.spec import NetSpec
from fuzz.judge.failures import ParityFailure, ThunderCrash, Undetermined
from fuzz.judge.roles import AFTER, LATER, tensor_role

if sys.version_info >= (3, 11):
    import tomllib
else:  # pytest's own dependency there
    import tomli as tomllib

ENTRY_FILE = "entry.toml"
# A band's upper edges are its reproductions' largest numbers times MARGIN, its lower error edge their smallest
# divided by it: bf16 reproductions of one gap on other seeds spread by up to ~3x (measured, docs/oracle.md); a fault
# 5x beyond the upper edge must not fit.
MARGIN = 2.0
MIN_REPRODUCTIONS = 3


@dataclass(frozen=True)
class Observation:
    """One failure as a signature sees it: class, triage, crash signature ('' for a divergence), and per diverging
    tensor its role, error and drift; with the dtype and device it ran in."""

    failure_class: str
    triage: str
    crash: str
    tensors: tuple[tuple[str, float, float], ...]
    dtype: str
    device: str

    @property
    def roles(self) -> tuple[str, ...]:
        return tuple(sorted({role for role, _, _ in self.tensors}))


def observe(spec: NetSpec, failure: ParityFailure) -> Observation:
    """The `Observation` of ``failure`` on ``spec``.

    Training steps: a tensor that diverges at the first step is judged by its first step (a bug of one forward and
    backward shows again at later steps, on other inputs: a wrong derivative that is NaN only on some of them), and
    the state training leaves is then only a consequence; a tensor that diverges at later steps only keeps the role
    "... at a later step" (a bug of training). A bug of training on a tensor that a known bug also gets wrong at the
    first step is not hidden by this: whether the failure goes away without the known bug's trigger is run, trained.
    """
    crash = failure.crash_signature if isinstance(failure, ThunderCrash) else ""
    tensors = [(tensor_role(spec, m.name), m.error, m.drift) for m in failure.mismatches]
    first = {role for role, _, _ in tensors if not role.endswith(LATER) and role != AFTER}
    if first:
        tensors = [
            t for t in tensors if t[0] in first or (t[0].endswith(LATER) and t[0].removesuffix(LATER) not in first)
        ]
    return Observation(failure.failure_class, failure.triage, crash, tuple(tensors), spec.dtype, spec.device)


def _edge(value: float) -> float:
    return value if math.isfinite(value) else math.inf


def record_signatures(observations: list[Observation], thunder: str) -> list[dict[str, Any]]:
    """The ``[[signature]]`` tables of an entry from its reproductions' ``observations`` on thunder ``thunder``."""
    grouped: dict[tuple, list[Observation]] = {}
    for seen in observations:
        grouped.setdefault((seen.failure_class, seen.triage, seen.crash), []).append(seen)
    signatures = []
    for (failure_class, triage, crash), seen in grouped.items():
        bands: dict[tuple[str, str], list[Observation]] = {}
        for one in seen:
            bands.setdefault((one.dtype, one.device), []).append(one)
        signatures.append(
            {
                "class": failure_class,
                "triage": triage,
                "crash": crash,
                "roles": sorted({role for one in seen for role in one.roles}),
                "band": [_band(dtype, device, thunder, group) for (dtype, device), group in sorted(bands.items())],
            }
        )
    return signatures


def with_other_devices(recorded: list[dict[str, Any]], previous: list[dict[str, Any]], device: str) -> list[dict]:
    """``recorded`` signatures (on ``device``) joined by the bands ``previous`` ones hold for other devices: recording
    on one device never drops what another device recorded."""
    merged = [dict(signature, band=list(signature["band"])) for signature in recorded]
    for old in previous:
        kept = [band for band in old["band"] if band["device"] != device]
        if not kept:
            continue
        key = (old["class"], old["triage"], old["crash"])
        same = next((s for s in merged if (s["class"], s["triage"], s["crash"]) == key), None)
        if same is None:
            merged.append(dict(old, band=kept))
        else:
            same["roles"] = sorted({*same["roles"], *old["roles"]})
            same["band"] += kept
    return merged


def _band(dtype: str, device: str, thunder: str, seen: list[Observation]) -> dict[str, Any]:
    errors = [error for one in seen for _, error, _ in one.tensors] or [0.0]
    drifts = [drift for one in seen for _, _, drift in one.tensors] or [0.0]
    return {
        "dtype": dtype,
        "device": device,
        "thunder": thunder,
        "reproductions": len(seen),
        "error": [_edge(min(errors)), _edge(max(errors))],
        "drift": [_edge(min(drifts)), _edge(max(drifts))],
    }


def read_entry(directory: Path) -> dict[str, Any] | None:
    """``directory/entry.toml``, or None where the entry has none (yet)."""
    path = directory / ENTRY_FILE
    return tomllib.loads(path.read_text()) if path.exists() else None


def resemblance(entry: dict[str, Any], seen: Observation) -> str | None:
    """None when ``seen`` is the entry's bug (a signature matches whole, every number inside its band), else how it
    differs from the closest signature, in a few words; ``entry`` has at least one signature."""
    differences = [_difference(signature, seen) for signature in entry["signature"]]
    if None in differences:
        return None
    return min(differences, key=len)


def _difference(signature: dict[str, Any], seen: Observation) -> str | None:
    # An undetermined triage (another bug without checkpoints masks it, `Undetermined`), observed or recorded, is
    # either triage.
    undetermined = Undetermined.label in (seen.triage, signature["triage"])
    if signature["class"] != seen.failure_class or (signature["triage"] != seen.triage and not undetermined):
        return f"another class or triage ({seen.failure_class}, {seen.triage})"
    if _rank_free(signature["crash"]) != _rank_free(seen.crash):
        return f"another crash ({seen.crash})"
    if extra := [role for role in seen.roles if role not in signature["roles"]]:
        return f"other tensors diverge ({', '.join(extra)})"
    if seen.crash:  # a crash has no numbers: its signature is the band
        return None
    if not seen.tensors and signature["roles"]:  # a zoo model's self-consistency failure measures no tensor
        return "no diverging tensor measured"
    # This device's band; until one is recorded there, the dtype's band on another device stands in (a CUDA box
    # judges by the CPU's numbers rather than calling every reproduction new).
    bands = [b for b in signature["band"] if b["dtype"] == seen.dtype]
    band = next((b for b in bands if b["device"] == seen.device), bands[0] if bands else None)
    if band is None:
        return f"no band recorded for {seen.dtype}"
    low, high = band["error"][0] / MARGIN, band["error"][1] * MARGIN
    for role, error, drift in seen.tensors:
        if not low <= error <= high:
            return f"{role}: error {error:.3g} outside the band [{low:.3g}, {high:.3g}]"
        if drift > band["drift"][1] * MARGIN:
            return f"{role}: drift {drift:.3g} above the band's {band['drift'][1] * MARGIN:.3g}"
    return None


def _rank_free(crash: str) -> str:
    """A crash signature with its runs of blanked numbers merged: a shape's rank does not tell two bugs apart
    (measured: "reshape a.shape=(#, #)" and "(#, #, #)" from one view-update bug on 2-D and 3-D inputs)."""
    return re.sub(r"#(?:, #)+", "#", crash)


_SIGNATURE_HEADER = "# The signature of known issue"


def _claim(text: str) -> str:
    """The hand-written part of an entry.toml's text: everything above its recorded signatures (their header, or the
    first ``[[signature]]`` table where the header was edited away)."""
    return re.split(rf"^(?:{re.escape(_SIGNATURE_HEADER)}|\[\[signature\]\])", text, maxsplit=1, flags=re.M)[0].rstrip(
        "\n"
    )


def entry_text(claim: str, issue_id: str, signatures: list[dict[str, Any]], how: str) -> str:
    """``entry.toml``'s text: the hand-written claim (the part of ``claim``, the file's text, above any recorded
    signature), then the signatures, headed by how they were recorded."""
    lines = [
        _claim(claim),
        "",
        f"{_SIGNATURE_HEADER} {issue_id}: {how}.",
        "# Written by `ckpt-fuzz known-issues --record`; do not edit by hand (fuzz/registry/signatures.py).",
    ]
    for signature in signatures:
        lines += ["", "[[signature]]"]
        lines += [f"{key} = {_toml(signature[key])}" for key in ("class", "triage", "crash", "roles")]
        for band in signature["band"]:
            lines += ["", "[[signature.band]]"]
            lines += [f"{key} = {_toml(value)}" for key, value in band.items()]
    return "\n".join(lines) + "\n"


def _toml(value: object) -> str:
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return "inf" if math.isinf(value) else repr(float(f"{value:.4g}"))
    if isinstance(value, int):
        return str(value)
    return "[" + ", ".join(_toml(item) for item in value) + "]"
