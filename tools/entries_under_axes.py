"""Measure whether the known-issue entries keep matching their bugs when the arguments vary around them.

    .venv/bin/python -m tools.entries_under_axes [--out entries_under_axes.json] [--entries ID ...]

For every entry whose registered spec has op layers, each op layer's call is varied along each (axis, value class)
the catalog offers for it (`fuzz.generate.axes`, the first mutation of each class), the rest of the spec kept, and
the varied spec is run as a campaign would judge it. Each varied run is one of:

- ``passes``: the bug needs the sample's argument (no failure);
- ``the entry``: it fails, the entry's triggers hold, its signature and band match and stripping its trigger makes
  the failure go away (`fuzz.registry.issue.explained_by`): the entry still recognizes its bug;
- ``other entries``: explained by other known issues (not this entry);
- ``unexplained``: a failure no entry explains, which a campaign reports as new (printed with its difference from
  the entry): a different bug the axis reached, or an entry narrower than its bug;
- ``invalid``: eager rejects the varied network in the spec's dtype.
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from dataclasses import replace
from pathlib import Path

from fuzz.generate import axes
from fuzz.generate.op_catalog import catalog
from fuzz.generate.spec import NetSpec
from fuzz.judge.harness import check_spec
from fuzz.registry.issue import explained_by
from fuzz.registry.known_issues import KNOWN_ISSUES, KNOWN_ISSUES_DIR, known_issues_for

_OP_KINDS = ("op", "op_module")
_CALL_KEYS = ("op", "form", "target", "args", "kwargs")
_CONVERTER = "fixed"  # the campaign's default converter


def _mutations_of(params: dict) -> list[dict]:
    """The first catalog mutation of each value class of the call ``params`` (reverted to its sample) makes."""
    sample = axes.reverted(params)
    key = [sample.get(k) for k in _CALL_KEYS]
    for call in catalog().calls:
        if [call.params.get(k) for k in _CALL_KEYS] == key:
            firsts: dict[tuple[str, str], dict] = {}
            for mutation in call.mutations:
                firsts.setdefault((mutation["axis"], mutation["class"]), mutation)
            return list(firsts.values())
    return []


def _verdict(issue_id: str, varied: NetSpec) -> tuple[str, str]:
    outcome = check_spec(varied, converter=_CONVERTER)
    if not outcome.valid:
        return "invalid", outcome.invalid_reason or ""
    if outcome.failure is None:
        return "passes", ""
    known = known_issues_for(varied)
    entry = next((issue for issue in known if issue.id == issue_id), None)
    if (
        entry is not None
        and entry.reproduced_by(outcome.failure, varied)
        and explained_by(varied, [entry], "stock", None)
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
            for mutation in _mutations_of(layer.params):
                layers = list(spec.layers)
                layers[index] = replace(layer, params=axes.mutated(axes.reverted(layer.params), mutation))
                verdict, detail = _verdict(issue.id, replace(spec, layers=layers))
                row = {"layer": index, "axis": mutation["axis"], "class": mutation["class"], "verdict": verdict}
                results.setdefault(issue.id, []).append({**row, **({"detail": detail} if detail else {})})
                print(f"{issue.id}: layer {index} {mutation['axis']} {mutation['class']}: {verdict} {detail}")
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
