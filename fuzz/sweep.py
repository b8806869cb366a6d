"""The op family's systematic sweep and its coverage report.

The sweep is thunder's OpInfo test run through thunderfx inside a checkpoint: every drawable
op call (`fuzz.op_catalog`: each argument variant in each call form) alone in one checkpoint.
Random composition then finds what only combinations show; the sweep makes sure that no op is
left to chance. Cases are ordered so that every op has run once before any op runs twice.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from fuzz.op_catalog import catalog
from fuzz.report import CampaignStats
from fuzz.spec import CheckpointSpec, LayerSpec, NetSpec

CI_SWEEP_CASES = 16  # the ci profile's derandomized slice, spread over the whole catalog
_SWEEP_FEATURES = 4
_SWEEP_BATCH = 2


def sweep_specs(
    device: str, dtypes: Sequence[str], kinds: Sequence[str] = ("op", "op_module"), ops: Sequence[str] | None = None
) -> list[NetSpec]:
    """One spec per drawable call of ``kinds`` and ``ops`` (default: all): the call alone in one checkpoint.

    The k-th call of each op comes after the (k-1)-th call of every op, and runs in the k-th of
    the call's dtypes among ``dtypes`` (float32 first), so the first pass covers every op.
    """
    ranked: list[tuple[int, int, NetSpec]] = []
    seen: dict[str, int] = {}
    for call in catalog().calls:
        usable = [dtype for dtype in dtypes if dtype in call.dtypes]
        if not usable or call.kind not in kinds or (ops is not None and call.op not in ops):
            continue
        k = seen[call.op] = seen.get(call.op, -1) + 1
        spec = NetSpec(
            features=_SWEEP_FEATURES,
            layers=[LayerSpec(call.kind, call.params)],
            checkpoints=[CheckpointSpec(0, 1)],
            batch=_SWEEP_BATCH,
            dtype=usable[k % len(usable)],
            device=device,
            seed=k,
        )
        ranked.append((k, len(seen), spec))
    return [spec for _, _, spec in sorted(ranked, key=lambda entry: entry[:2])]


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
        "thunder_versions": found.versions,
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
