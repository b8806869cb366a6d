"""The op family's coverage report: how much of thunder's op surface ran inside a compiled checkpoint, and which
calls always sent their checkpoint to the fallback."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from fuzz.generate.op_catalog import OpCall, catalog
from fuzz.report.stats import CampaignStats

_LISTED_OPS = 12  # ops named on the terminal; summary.json lists them all


def op_family_summary(stats: CampaignStats, kinds: Sequence[str], ops: Sequence[str] | None) -> dict[str, Any]:
    """How much of thunder's op surface (calls of ``kinds`` and ``ops``) ran inside a checkpoint thunder compiled,
    and what never did."""
    found = catalog()
    calls = [call for call in found.calls if call.kind in kinds and (ops is None or call.op in ops)]
    drawable = list(dict.fromkeys(call.op for call in calls))
    compiled = {key.split(" ")[0] for key, counts in stats.op_coverage.items() if counts[0]}
    never = [op for op in drawable if op not in compiled]
    always_fell_back = {
        key: stats.op_split_reasons[key].most_common(1)[0][0] if stats.op_split_reasons[key] else "no split reason"
        for key, counts in stats.op_coverage.items()
        if counts[1] and not counts[0]
    }
    return {
        "mapped_differentiable_ops": len(found.mapped_differentiable),
        "drawable_ops": len(drawable),
        "drawable_calls": len(calls),
        "not_drawable": found.excluded,
        "ops_in_compiled_checkpoint": len(drawable) - len(never),
        "share_in_compiled_checkpoint": round((len(drawable) - len(never)) / len(drawable), 4) if drawable else None,
        "never_in_compiled_checkpoint": never,
        "every_op_compiled_after_s": (
            max(stats.op_first_compiled_s[op] for op in drawable) if drawable and not never else None
        ),
        "op_form_cells": {
            "exercised": len(stats.op_coverage),
            "compiled": sum(c[0] > 0 for c in stats.op_coverage.values()),
        },
        "always_fell_back": always_fell_back,
        "axes": axis_coverage(stats, calls),
        "thunder_versions": found.versions,
    }


def axis_coverage(stats: CampaignStats, calls: Sequence[OpCall]) -> dict[str, Any]:
    """Per op, the argument axes the catalog can vary (`fuzz.generate.axes`) and the value classes of each that ran
    inside a compiled checkpoint; the share of (op, axis) pairs varied there, and why each other pair was not."""
    offered: dict[str, dict[str, set[str]]] = {}
    for call in calls:
        for mutation in call.mutations:
            offered.setdefault(call.op, {}).setdefault(mutation["axis"], set()).add(mutation["class"])
    compiled: dict[tuple[str, str], set[str]] = {}
    fell_back: set[tuple[str, str]] = set()
    failed: set[tuple[str, str]] = set()
    for cell, (ran, fallbacks, failures) in stats.op_axis_coverage.items():
        op, axis, value_class = cell.split("\t")
        if ran:
            compiled.setdefault((op, axis), set()).add(value_class)
        (fell_back if fallbacks else failed if failures else set()).add((op, axis))
    pairs = [(op, axis) for op, by_axis in offered.items() for axis in by_axis]
    never = {
        f"{op} {axis}": "drawn, but thunder sent every region holding it to its fallback"
        if (op, axis) in fell_back
        else "drawn, but thunder failed on every network holding it (a crash or time-out: the run's failures or "
        "known issues)"
        if (op, axis) in failed
        else "not drawn inside a checkpoint in this run"
        for op, axis in pairs
        if (op, axis) not in compiled
    }
    return {
        "pairs": len(pairs),
        "pairs_varied_in_compiled_checkpoint": len(pairs) - len(never),
        "share_varied_in_compiled_checkpoint": round((len(pairs) - len(never)) / len(pairs), 4) if pairs else None,
        "never_varied": never,
        "by_op": {
            op: {
                axis: {"classes": sorted(classes), "compiled": sorted(compiled.get((op, axis), ()))}
                for axis, classes in by_axis.items()
            }
            for op, by_axis in offered.items()
        },
        "ops_without_an_axis": [op for op in dict.fromkeys(call.op for call in calls) if op not in offered],
    }


def fallback_report(family: dict[str, Any]) -> str:
    """The op calls that always sent their checkpointed region to thunderfx's fallback, with thunder's reason."""
    versions = family["thunder_versions"]
    lines = [
        f"# Op calls (op and call form) that sent every checkpointed region holding them to thunderfx's fallback "
        f"(thunder {versions.get('lightning-thunder')}, torch {versions.get('torch')})",
        *(f"{key}: {reason}" for key, reason in sorted(family["always_fell_back"].items())),
    ]
    return "\n".join(lines) + "\n"


def op_family_lines(family: dict[str, Any]) -> list[str]:
    """The op family's part of the terminal summary."""
    share = family["share_in_compiled_checkpoint"]
    lines = [
        f"op family: {family['ops_in_compiled_checkpoint']}/{family['drawable_ops']} drawable ops "
        f"({share:.1%}) ran inside a checkpoint thunder compiled; thunder's converter maps "
        f"{family['mapped_differentiable_ops']} differentiable ops, {len(family['not_drawable'])} not drawable "
        f"(reasons: 'not_drawable' in summary.json); op x form cells: {family['op_form_cells']}"
        if share is not None
        else "op family: no drawable op"
    ]
    if family["every_op_compiled_after_s"] is not None:
        lines.append(
            f"every drawable op ran inside a compiled checkpoint after {family['every_op_compiled_after_s']} s"
        )
    elif family["never_in_compiled_checkpoint"]:
        never = family["never_in_compiled_checkpoint"]
        shown = ", ".join(never[:_LISTED_OPS]) + (", ... (all: summary.json)" if len(never) > _LISTED_OPS else "")
        lines.append(f"never inside a compiled checkpoint ({len(never)}): {shown}")
    if (axes := family.get("axes", {})).get("pairs"):  # (none in a summary.json written before the axes)
        lines.append(
            f"argument axes: {axes['pairs_varied_in_compiled_checkpoint']}/{axes['pairs']} (op, axis) pairs "
            f"({axes['share_varied_in_compiled_checkpoint']:.1%}) varied inside a compiled checkpoint "
            "(the others, with why: 'axes' in summary.json)"
        )
    if family["always_fell_back"]:
        lines.append(
            f"{len(family['always_fell_back'])} op calls always sent their checkpoint to the fallback "
            "(op_fallbacks.txt): " + ", ".join(sorted(family["always_fell_back"]))
        )
    return lines
