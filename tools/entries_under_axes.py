"""Measure whether the known-issue entries keep matching their bugs when the arguments vary around them.

    .venv/bin/python -m tools.entries_under_axes [--out entries_under_axes.json] [--entries ID ...]

For every entry whose registered spec has op layers, each op layer's call is varied along each axis the catalog
offers for it (`fuzz.generate.axes`: the first candidate eager runs, never one that edits what the entry's own
mutation edited, so the bug's argument stays), the rest of the spec kept, and the varied spec is run as a campaign
would judge it. Each varied run is one of:

- ``passes``: the bug needs the sample's argument (no failure);
- ``the entry``: it fails, the entry's triggers hold, its signature and band match and stripping its trigger makes
  the failure go away (`fuzz.registry.issue.explained_by`): the entry still recognizes its bug;
- ``other entries``: explained by other known issues (not this entry);
- ``unexplained``: a failure no entry explains, which a campaign reports as new (printed with its difference from
  the entry): a different bug the axis reached, or an entry narrower than its bug;
- ``invalid``: eager rejects every candidate tried of the axis in the spec's dtype.
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from dataclasses import replace
from pathlib import Path

from fuzz.generate import axes
from fuzz.generate.spec import NetSpec
from fuzz.judge.verdict import check_spec
from fuzz.registry.issue import explained_by
from fuzz.registry.known_issues import KNOWN_ISSUES, KNOWN_ISSUES_DIR, known_issues_for

_OP_KINDS = ("op", "op_module")
_TRIES_PER_AXIS = 4
_CONVERTER = "fixed"  # the campaign's default converter


def _mutations_of(params: dict) -> dict[str, list[dict]]:
    """Per axis, the `fuzz.generate.axes.candidates` of the call ``params`` makes as registered (its own mutation
    kept: no candidate edits a place it edited), in the axes' order."""
    held = {json.dumps(edit["at"]) for edit in params.get("mutation", {}).get("edits", [])}
    by_axis: dict[str, list[dict]] = {}
    for mutation in axes.candidates(params["args"], params["kwargs"]):
        if not any(json.dumps(edit["at"]) in held for edit in mutation["edits"]):
            by_axis.setdefault(mutation["axis"], []).append(mutation)
    return by_axis


def _verdict(issue_id: str, varied: NetSpec) -> tuple[str, str]:
    try:
        outcome = check_spec(varied, converter=_CONVERTER)
    except Exception as error:  # eager itself rejects the varied call (the catalog filters these for a campaign)
        return "invalid", f"{type(error).__name__}: {str(error).splitlines()[0][:120] if str(error) else ''}"
    if not outcome.valid:
        return "invalid", outcome.invalid_reason or ""
    if outcome.failure is None:
        return "passes", ""
    known = known_issues_for(varied)
    entry = next((issue for issue in known if issue.id == issue_id), None)
    if (
        entry is not None
        and entry.reproduced_by(outcome.failure, varied)
        and explained_by(varied, [entry], _CONVERTER, None)
    ):
        return "the entry", ""
    others = [issue for issue in known if issue.id != issue_id and issue.reproduced_by(outcome.failure, varied)]
    if others and explained_by(varied, others, _CONVERTER, None):
        return "other entries", ", ".join(issue.id for issue in others)
    why = entry.difference(outcome.failure, varied) if entry else "the entry's triggers do not hold"
    return "unexplained", f"{why}; {str(outcome.failure).splitlines()[0][:160]}"


def measure(entry_ids: list[str] | None) -> dict:
    results: dict[str, list[dict]] = {}
    for issue in KNOWN_ISSUES:
        if entry_ids and issue.id not in entry_ids:
            continue
        spec = NetSpec.from_json((KNOWN_ISSUES_DIR / issue.id / "spec.json").read_text())
        for index, layer in enumerate(spec.layers):
            if layer.kind not in _OP_KINDS:
                continue
            for axis, mutations in _mutations_of(layer.params).items():
                for mutation in mutations[:_TRIES_PER_AXIS]:  # the first the spec's dtype runs eagerly
                    layers = list(spec.layers)
                    layers[index] = replace(layer, params=axes.mutated(layer.params, mutation))
                    verdict, detail = _verdict(issue.id, replace(spec, layers=layers))
                    if verdict != "invalid":
                        break
                row = {"layer": index, "axis": axis, "class": mutation["class"], "verdict": verdict}
                results.setdefault(issue.id, []).append({**row, **({"detail": detail} if detail else {})})
                print(f"{issue.id}: layer {index} {axis} {mutation['class']}: {verdict} {detail}", flush=True)
    counts = Counter(row["verdict"] for rows in results.values() for row in rows)
    return {"entries": len(results), "varied_runs": sum(counts.values()), "verdicts": dict(counts), "by_entry": results}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("entries_under_axes.json"))
    parser.add_argument("--entries", nargs="*", help="entry ids (default: every entry with op layers)")
    arguments = parser.parse_args()
    result = measure(arguments.entries)
    arguments.out.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps({k: v for k, v in result.items() if k != "by_entry"}))


if __name__ == "__main__":
    main()
