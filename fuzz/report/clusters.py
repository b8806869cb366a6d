"""Clusters: a run's failures grouped by root cause, an index over its failure folders.

Two failures are one cluster when they fail in the same class and triage, the same way (a crash's signature, or the
roles of the tensors that diverge: `fuzz.judge.roles.tensor_role`), in the same ops (an op layer's callable)
or, for networks without op layers, the same layer kinds; a failure whose reduced network is stand-ins only is "in no
op" (`fuzz.generate.reduce.in_no_op`: any op of the same shape in their place still fails), whatever it was found
with. Sizes, seeds, dtypes and an op's other arguments do not count: one op's bug hit by many samples of the op sweep
is one cluster, each sample still its own folder.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fuzz.generate.reduce import STAND_IN, in_no_op
from fuzz.report.run_folder import SUMMARY, find_run, write_atomically

CHANGES = "changes.json"  # in a run folder: `compared` with an earlier run (`ckpt-fuzz report --against`)

if TYPE_CHECKING:
    from fuzz.generate.spec import NetSpec
    from fuzz.judge.failures import ParityFailure


def cluster_of(spec: NetSpec, failure: ParityFailure, reduced: bool = True) -> dict[str, Any]:
    """``{"cluster": id, "cluster_label": words, "shows": how it shows (a crash's signature, or the roles of the
    tensors that differ), "size": how big the network is}`` of a failure (its failure.json keeps them; the smallest
    member of a cluster stands for it). A network not ``reduced`` (left by a dead worker,
    or a check of its reduction cut short) is in no op or kind it holds: nothing in it was tried without them."""
    from fuzz.judge.failures import ThunderCrash  # (imports torch: the summary, which only groups, does not)
    from fuzz.judge.roles import tensor_role

    crash = failure.crash_signature if isinstance(failure, ThunderCrash) else ""
    roles = sorted({tensor_role(spec, mismatch.name) for mismatch in failure.mismatches})
    ops = sorted({layer.params["target"] for layer in spec.layers if "op" in layer.params})
    kinds = sorted({layer.kind for layer in spec.layers if layer.kind != STAND_IN})
    if not reduced:
        where = ["a network not reduced"]
    else:
        where = ["no op"] if in_no_op(spec) else ops or kinds or ([spec.model.arch] if spec.model else [])
    how = crash or ", ".join(roles) or "no tensor named"
    key = [failure.failure_class, failure.triage, how, where]
    label = f"{failure.failure_class} [{failure.triage}] in {' + '.join(where) or 'an empty network'}: {how}"
    size = len(spec.layers) * 1000 + spec.batch * spec.features + len(spec.checkpoints)
    return {
        "cluster": hashlib.sha1(json.dumps(key).encode()).hexdigest()[:8],
        "cluster_label": label[:300],
        "shows": how,
        "size": size,
    }


def clusters(failures: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The clusters of a summary's ``failures`` (records without a cluster, from older runs, stand alone), largest
    first: each with its label, its members' ids, how many folders and findings it has, and its smallest member."""
    grouped: dict[str, list[dict[str, Any]]] = {}
    for failure in failures:
        grouped.setdefault(failure.get("cluster") or failure["id"], []).append(failure)
    listed = []
    for cluster, members in grouped.items():
        smallest = min(members, key=lambda f: (f.get("size", 0), f["id"]))
        listed.append(
            {
                "cluster": cluster,
                "label": smallest.get("cluster_label") or f"{smallest['class']} [{smallest['triage']}]",
                "class": smallest["class"],
                "triage": smallest["triage"],
                "members": [f["id"] for f in members],
                "folders": len(members) + sum(len(f.get("variants", ())) for f in members),
                "found": sum(f.get("found_by_shards", 1) for f in members),
                "smallest": smallest["id"],
                "repro": smallest["repro"],
                "message": smallest["message"],
            }
        )
    return sorted(listed, key=lambda c: (-c["folders"], c["label"]))


def compared(current: list[dict[str, Any]], earlier: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """What changed between two runs' clusters: "new" (only in ``current``), "gone" (only in ``earlier``) and
    "changed" (in both, with another number of folders: more or fewer networks fail that way)."""
    before = {c["cluster"]: c for c in earlier}
    now = {c["cluster"]: c for c in current}
    return {
        "new": [c for k, c in now.items() if k not in before],
        "gone": [c for k, c in before.items() if k not in now],
        "changed": [
            {**c, "folders_before": before[k]["folders"]}
            for k, c in now.items()
            if k in before and c["folders"] != before[k]["folders"]
        ],
    }


def comparison_lines(changes: dict[str, list[dict[str, Any]]], earlier: str) -> list[str]:
    """`compared`'s result in words, one line per cluster that is new, gone or changed since run ``earlier``."""
    lines = [
        f"clusters since {earlier}: {len(changes['new'])} new, {len(changes['gone'])} gone, "
        f"{len(changes['changed'])} changed"
    ]
    lines += [f"  NEW {c['label']} ({c['folders']} folder(s); smallest {c['smallest']})" for c in changes["new"]]
    lines += [f"  GONE {c['label']} ({c['folders']} folder(s) in {earlier})" for c in changes["gone"]]
    lines += [f"  CHANGED {c['label']}: {c['folders_before']} -> {c['folders']} folder(s)" for c in changes["changed"]]
    return lines


def compare_runs(run_dir: Path, artifacts: Path, against: str) -> list[str]:
    """How ``run_dir``'s clusters differ from run ``against``'s ("previous": the latest earlier run of the same
    command under ``artifacts``), in words (`comparison_lines`); kept in the run folder (`CHANGES`) for its report.
    FileNotFoundError with a one-line message when there is no such run."""

    def summary_of(folder: Path) -> dict[str, Any]:
        return json.loads((folder / SUMMARY).read_text())

    def command_of(folder: Path) -> list[str]:  # "ckpt-fuzz run": a campaign is compared with a campaign
        return summary_of(folder).get("command", "").split()[:2]

    if against == "previous":
        runs = sorted(p.parent for p in artifacts.glob(f"*/{SUMMARY}") if not p.parent.is_symlink())
        earlier = [r for r in runs if r.name < run_dir.name and command_of(r) == command_of(run_dir)]
        if not earlier:
            raise FileNotFoundError(f"no earlier run like {run_dir.name} under {artifacts} to compare with")
        earlier_dir = earlier[-1]
    else:
        earlier_dir = find_run(artifacts, against)

    def clusters_of(folder: Path) -> list[dict[str, Any]]:
        summary = summary_of(folder)
        return summary.get("clusters") or clusters(summary["failures"])

    changes = compared(clusters_of(run_dir), clusters_of(earlier_dir))
    write_atomically(run_dir / CHANGES, json.dumps({"earlier": earlier_dir.name, "changes": changes}) + "\n")
    return comparison_lines(changes, earlier_dir.name)
