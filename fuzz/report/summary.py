"""The campaign summary: how the test items ended, the summary's data (``summary.json``) and its terminal lines.

Imports no torch (`ckpt-fuzz report` renders a summary in a fraction of a second).
"""

from __future__ import annotations

import os
import shlex
import sys
import time
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fuzz.generate.architectures import ARCHITECTURES
from fuzz.generate.coverage import NESTED
from fuzz.report.clusters import clusters
from fuzz.report.op_family import op_family_lines
from fuzz.report.program_coverage import program_structure_lines
from fuzz.report.run_folder import AB_RECORDS, RunFolder
from fuzz.report.stats import saved_ratios

if TYPE_CHECKING:
    from fuzz.report.stats import CampaignStats

if sys.version_info < (3, 11):  # Hypothesis's own dependency there
    from exceptiongroup import BaseExceptionGroup

COMMAND_VARIABLE = "CKPT_FUZZ_COMMAND"
STOPPED_FIRST = "not checked: the run was stopped first"


def build_summary(config, stats: CampaignStats, items: ItemResults, wall_s: float) -> dict[str, Any]:
    """The summary of a run with ``config`` (a `CampaignConfig`): its merged ``stats``, its ``items``' ends."""
    from fuzz.report.repro import found_with

    summary = {
        "run_id": config.run_id,
        "command": config.command,
        "profile": config.profile,
        "device": config.device,
        "converter": config.converter,
        "found_with": found_with(config.converter),
        "seed": config.seed,
        "executors": list(config.executors) or "thunder's defaults",
        **counters(stats, wall_s),
    }
    # Shards, and sweep cases of ops whose plumbing fails alike, often reduce to the same minimal failure: list each
    # failure id once, with how many times it was found and its other networks (``variants``, each in its own folder).
    distinct: dict[str, dict[str, Any]] = {}
    # A process stopped or killed after writing a failure but before its counters: the folder on disk is the record.
    folder = RunFolder(config.run_dir)
    counted = {failure["repro"] for failure in stats.failures}
    unlisted = [
        {**record, "shrunk_after_s": None, "after_examples": None}
        | {"confirmed": None, "confirmation": STOPPED_FIRST, "confirmation_seconds": None}
        for record in folder.written_failures()
        if record["repro"] not in counted
    ]
    for failure in [*stats.failures, *unlisted]:
        listed = distinct.setdefault(failure["id"], {**failure, "found_by_shards": 0, "variants": []})
        listed["found_by_shards"] += 1
        if failure["repro"] != listed["repro"] and failure["repro"] not in listed["variants"]:
            listed["variants"].append(failure["repro"])
    summary["failures"] = list(distinct.values())
    summary["clusters"] = clusters(summary["failures"])
    # First sight of a failure whose shrinking never ended (the run was stopped): listed, not lost.
    summary["unshrunk_failures"] = folder.written_failures(unshrunk=True)
    summary.update(items.to_dict())
    summary["replay_options"] = replay_options(config)
    return summary


def counters(stats: CampaignStats, wall_s: float) -> dict[str, Any]:
    """The summary's counters of ``stats`` over ``wall_s`` seconds, with the rates and shares made of them."""
    return {
        "wall_seconds": round(wall_s, 1),
        "items_seconds": None if (items_s := stats.items_seconds) is None else round(items_s, 1),
        **stats.to_dict(),
        # Over the campaign's own time where known (a session of other tests too, `make test`, runs longer).
        "examples_per_second": round(stats.examples / (items_s or wall_s), 3) if items_s or wall_s else 0.0,
        "seconds_per_example": round(stats.seconds / stats.examples, 3) if stats.examples else None,
        "compiled_share": round(stats.compiled / stats.valid, 4) if stats.valid else None,
        "discarded_share": round(stats.discarded / (stats.discarded + stats.examples), 4)
        if (stats.discarded + stats.examples)
        else 0.0,
    }


def replay_options(config) -> dict[str, Any]:
    """The options (name without ``--`` -> value) a replay of the run with ``config`` needs: what decides which
    networks its database entries decode to, and where that database is (`ckpt-fuzz replay`)."""
    listed = {
        "fuzz-layers": config.kinds,
        "fuzz-dtypes": config.dtypes,
        "fuzz-grad-modes": config.grad_modes,
        "fuzz-ops": config.ops,
        "fuzz-families": config.families,  # (not what entries mean: the run's focus, replayed alike)
    }
    return {
        "fuzz-shards": config.shards,
        **{name: ",".join(values) if values else None for name, values in listed.items()},
        "fuzz-database": config.database,
        "fuzz-device": config.device,
        "converter": config.converter,
        "fuzz-timeout": config.timeout_s,
        # `check` draws checkpoint options the other modes do not (slow known issues): other choices, other networks.
        "known-issues": config.known_issues,
        "fuzz-executors": ",".join(config.executors) or "auto",
    }


UNSHRUNK_AT_THE_END = (
    "not shrunk to the end: the budget, or its time to shrink beside the items still to come, ended Hypothesis's "
    "shrinking, and the reduction had only the minute left (`ckpt-fuzz replay` shrinks it further)"
)


def _startup_lines(summary: dict[str, Any]) -> list[str]:
    if summary.get("startup_s") is None:
        return []
    return [
        f"start-up: {summary['startup_s']} s from the command's start to the first example (imports, collection, "
        f"workers), then {summary['first_example_s']} s for that example (thunder's and inductor's one-off set-up)"
    ]


def started_at() -> float:
    """When this process started (`time.time`): the command's start, as `ckpt-fuzz` execs pytest in its own process
    (Linux's /proc; elsewhere, now)."""
    try:
        ticks = int(Path("/proc/self/stat").read_text().rpartition(")")[2].split()[19])
        lines = Path("/proc/stat").read_text().splitlines()
        boot = next(int(line.split()[1]) for line in lines if line.startswith("btime "))
    except (OSError, ValueError, IndexError, StopIteration):
        return time.time()
    return boot + ticks / os.sysconf("SC_CLK_TCK")


def command_line(args: list[str]) -> str:
    """The command that started this pytest session with ``args``: ``$CKPT_FUZZ_COMMAND`` (set, and taken here, by
    `ckpt-fuzz`, whose command the user typed), else pytest's own."""
    return os.environ.pop(COMMAND_VARIABLE, None) or shlex.join([sys.executable, "-m", "pytest", *args])


FINDING, HARNESS_ERROR = "finding", "harness-error"


class ItemResults:
    """How the campaign's test items ended, as the controller saw their reports.

    A failed item is a *finding* (a parity failure, a dead worker running a network, a known
    issue whose status changed) or a *harness error*: anything else (a Hypothesis health check, an
    internal error of ours), which is never reported as thunder's.
    """

    def __init__(self) -> None:
        self.campaign_items = 0
        self.out_of_budget_before_first_example = 0
        self.harness_errors: list[dict[str, str]] = []
        self.findings: list[str] = []  # items failed by thunder's failures (listed in the summary's failures)
        self.other_failed: list[str] = []  # failed items that are not the campaign's (self-tests)
        self.warnings: Counter[str] = Counter()  # first line of each warning -> test items it was recorded in

    def record_warning(self, message: str) -> None:
        """Count a warning pytest recorded (thunder's and torch's repeat on many examples: listed once each)."""
        self.warnings[message.strip().splitlines()[0][:300] if message.strip() else "(empty warning)"] += 1

    def record(self, nodeid: str, when: str, failed: bool, properties: dict[str, Any]) -> None:
        """Count one report of item ``nodeid`` (phase ``when``; its `item_properties` in ``properties``)."""
        if not properties.get("fuzz_campaign_item"):
            if failed and nodeid not in self.other_failed:
                self.other_failed.append(nodeid)
            return
        self.campaign_items += when == "call"
        self.out_of_budget_before_first_example += bool(properties.get("fuzz_out_of_budget"))
        if properties.get("fuzz_interrupted"):  # its worker was stopped by a signal: the run says interrupted
            return
        if failed and properties.get("fuzz_failure_kind") == FINDING:
            self.findings.append(nodeid)
        elif failed:
            message = properties.get("fuzz_failure_message") or "the item failed outside an example"
            self.harness_errors.append({"item": nodeid, "error": message})

    def to_dict(self) -> dict[str, Any]:
        return {
            "items_out_of_budget_before_first_example": self.out_of_budget_before_first_example,
            "harness_errors": self.harness_errors,
            "other_failed_tests": self.other_failed,
            "warnings": dict(self.warnings.most_common()),
        }

    def result(self, exit_status: int, summary: dict[str, Any]) -> str:
        """One line that agrees with pytest's ``exit_status`` and names what made the run fail."""
        changed = [  # verdicts of `KnownIssue.status` other than the two its version record expects
            issue
            for issue, verdict in summary["known_issue_checks"].items()
            if verdict != "reproduces" and not verdict.startswith("not expected: ")
        ]
        reasons = [
            f"{len(items)} {what}"
            for items, what in (
                (summary["failures"], "failure(s)"),
                (summary.get("unshrunk_failures", ()), "failure(s) not shrunk yet"),
                (self.harness_errors, "harness error(s)"),
                (changed, "known issue(s) whose status changed"),
                (self.other_failed, "other failed test(s)"),
            )
            if items
        ]
        if exit_status == 0:
            return "passed: nothing failed"
        if exit_status == 2:
            return "interrupted: the run was stopped; what it found so far is listed" + (
                f" ({', '.join(reasons)})" if reasons else ""
            )
        if exit_status == 1:
            unlisted = f"{len(self.findings)} item(s) failed by thunder with no failure written (see pytest's report)"
            return "failed: " + (", ".join(reasons) or (unlisted if self.findings else "a test failed"))
        return f"pytest error (exit status {exit_status}): the run did not complete"


def item_properties(error: BaseException | None, out_of_budget: bool) -> list[tuple[str, Any]]:
    """What a worker tells the controller about how a campaign item ended (pytest's ``user_properties``)."""
    properties: list[tuple[str, Any]] = [("fuzz_out_of_budget", out_of_budget)] if out_of_budget else []
    if error is not None:
        kind = FINDING if _is_finding(error) else HARNESS_ERROR
        message = f"{type(error).__name__}: {str(error).strip().splitlines()[0] if str(error).strip() else ''}"
        properties += [("fuzz_failure_kind", kind), ("fuzz_failure_message", message[:500])]
    return properties


def _is_finding(error: BaseException) -> bool:
    """A failure of thunder's (or a known issue whose status changed), as opposed to one of the harness."""
    from fuzz.judge.failures import KnownIssueChanged, ParityFailure

    if isinstance(error, BaseExceptionGroup):  # Hypothesis reports several distinct bugs as a group
        return all(_is_finding(e) for e in error.exceptions)
    return isinstance(error, ParityFailure | KnownIssueChanged)


def confirmation_text(failure: dict[str, Any]) -> str:
    """A failure's confirmation, in a few words."""
    if failure["confirmed"] is None:
        return failure["confirmation"]
    return "confirmed" if failure["confirmed"] else f"NOT CONFIRMED: {failure['confirmation']}"


def summary_lines(summary: dict[str, Any]) -> list[str]:
    """The campaign summary for the terminal: the run, what it ran on, the known issues, coverage, the failures."""
    return [
        *_run_lines(summary),
        *_device_lines(summary),
        *_known_issue_lines(summary),
        *_coverage_lines(summary),
        *_failure_lines(summary),
        f"result: {summary['result']}",
    ]


def _run_lines(summary: dict[str, Any]) -> list[str]:
    """The run: its command, examples and speed, what thunder compiled, what was invalid."""
    lines = [
        f"run {summary['run_id']}: {summary['command']}",
        f"{summary['examples']} examples ({summary['valid']} valid; {summary['repeats']} repeated networks answered "
        f"from memory) in {summary['wall_seconds']} s"
        + (f" (the campaign's test items: {summary['items_seconds']} s)" if summary.get("items_seconds") else "")
        + f" = {summary['examples_per_second']} examples/s, {summary['seconds_per_example']} s/example "
        f"[profile {summary['profile']}, device {summary['device']}]",
        *_startup_lines(summary),
        f"found with {summary['found_with']}",
        f"thunder compiled the whole network (every graph and checkpointed region) in {summary['compiled_by_thunder']}"
        f"/{summary['valid']} valid examples (share {summary['compiled_share']}); {summary['fell_back']} sent a part "
        "to the fallback",
        f"invalid examples by reason: {summary['invalid_reasons'] or 'none'}; "
        f"{len(summary['coverage'])} features exercised (counts under 'coverage' in summary.json)",
    ]
    return lines


def _device_lines(summary: dict[str, Any]) -> list[str]:
    """GPU pinning, the converter A/B, memory saved for backward, time-outs run again."""
    lines: list[str] = []
    if summary.get("gpus"):
        pinned = ", ".join(f"{worker} -> {gpu}" for worker, gpu in summary["gpus"].items())
        lines.append(f"workers pinned to GPUs (CUDA_VISIBLE_DEVICES): {pinned}")
    if summary["converter_comparisons"]:
        lines.append(
            f"converter A/B: the fixed converter changed the verdict in {summary['converter_verdict_changes']} and "
            f"the verdict or any output/gradient value in {summary['converter_disagreements']} of "
            f"{summary['converter_comparisons']} examples (per example: {AB_RECORDS})"
        )
    for kind, ratio in saved_ratios(summary.get("saved_bytes", {})).items():
        lines.append(
            f"saved for backward, thunderfx / eager with checkpoints ({kind}): median {ratio['median']:.3g}, "
            f"worst {ratio['worst']:.3g} over {ratio['examples']} examples"
        )
        if reasons := dict(summary.get("saved_reasons", {}).get(kind, {})):
            eager = reasons.pop("eager", 0)
            why = ", ".join(f"{reason} {nbytes} B" for reason, nbytes in sorted(reasons.items()))
            lines.append(f"  thunderfx saved, by reason: {why or 'nothing'} (eager: {eager} B in all)")
    if summary["timeout_reruns"]:
        lines.append(
            f"{summary['timeout_reruns']} thunderfx runs went over the time limit and were run once more "
            "(only a second time-out counts)"
        )
    return lines


def _known_issue_lines(summary: dict[str, Any]) -> list[str]:
    """Failing examples by class, and what the known issues and their fixes explain."""
    lines: list[str] = []
    lines.append(
        "failing examples by class, shrink steps included, known issues not: "
        f"{summary['failing_examples_by_class'] or 'none'}"
    )
    lines += [
        f"known issue {issue}: reproduced in {counts[0]}, did not reproduce in {counts[1]} examples"
        for issue, counts in summary["known_issues"].items()
    ]
    lines += [f"known issue {issue} re-tested: {verdict}" for issue, verdict in summary["known_issue_checks"].items()]
    if by_fix := summary.get("known_by_fix"):
        lines.append(
            "failing examples that pass on thunder with the known fixes, by the fix credited: "
            f"{', '.join(f'{entries} {n}' for entries, n in sorted(by_fix.items()))} "
            f"({summary.get('fix_rejudge_s', 0):.0f} s judging failures again under the fixes)"
        )
    if summary["known_class_failures"] or summary.get("known_resembling_failures"):
        lines.append(
            f"{summary['known_class_failures']} failing examples matched a known issue's signature inside its band; "
            f"{summary['known_explained_failures']} went away without the issue's trigger (attributed to it), "
            f"the rest are reported as new failures, as are {summary.get('known_resembling_failures', 0)} that "
            "resembled a known issue outside its signature or band"
        )
    return lines


def _coverage_lines(summary: dict[str, Any]) -> list[str]:
    """Model-zoo architectures and nested networks drawn, networks not run, the op family, items not reached."""
    lines: list[str] = []
    if drawn := {arch: summary["coverage"].get(f"model {arch}", 0) for arch in ARCHITECTURES}:
        if any(drawn.values()):
            lines.append(f"model-zoo examples per architecture: {', '.join(f'{a} {n}' for a, n in drawn.items())}")
    if nested := summary["coverage"].get(NESTED):
        lines.append(f"nested-checkpoint slice (nightly, shard 0, its own time limit per network): {nested} networks")
    lines += program_structure_lines(summary)
    if summary["discarded"]:
        lines.append(
            f"{summary['discarded']} drawn networks not run (a known issue they match takes minutes to fail: "
            f"{summary.get('discarded_reasons') or 'see summary.json'}): share {summary['discarded_share']:.1%}"
        )
    if "op_family" in summary:
        lines += op_family_lines(summary["op_family"])
    if summary["items_out_of_budget_before_first_example"]:
        lines.append(
            f"{summary['items_out_of_budget_before_first_example']} test item(s) ran out of budget before Hypothesis "
            "generated a valid example (raise --fuzz-minutes to run them)"
        )
    if first := summary["first_failure"]:
        lines.append(f"first failure after {first['after_s']} s (example {first['example']})")
    return lines


def _failure_lines(summary: dict[str, Any]) -> list[str]:
    """One line per failure cluster, the unshrunk ones, warnings and harness errors."""
    lines: list[str] = []
    # One line per cluster (`fuzz.report.clusters`: one root cause), standing for it its smallest member.
    by_id = {f["id"]: f for f in summary["failures"]}
    for cluster in summary.get("clusters") or clusters(summary["failures"]):
        f = by_id[cluster["smallest"]]
        others = [i for i in cluster["members"] if i != f["id"]]
        lines.append(
            f"FAILURE {cluster['label']}\n    {cluster['folders']} folder(s), found {cluster['found']} time(s); "
            f"smallest {f['id']} [{confirmation_text(f)}] "
            + (f"shrunk after {f['shrunk_after_s']} s" if f["shrunk_after_s"] is not None else "")
            + f": {f['message']}\n    repro: {f['repro']}"
            + (f"\n    blames {f['blames']}" if f.get("blames") else "")
            + "".join(f"\n    {line}" for line in f.get("resembles", ()))
            + (f"\n    the same in {len(others)} other network(s): {', '.join(others)}" if others else "")
        )
    lines += [
        f"FAILURE (not shrunk: the run was stopped first) {f['id']} [{f['class']}, {f['triage']}]: {f['message']}\n"
        f"    repro: {f['repro']}"
        for f in summary.get("unshrunk_failures", ())
    ]
    if unshrunk := [f["id"] for f in summary["failures"] if f.get("unshrunk")]:
        lines.append(f"{len(unshrunk)} finding(s) {UNSHRUNK_AT_THE_END}: {', '.join(unshrunk)}")
    lines += [f"warning, in {count} test item(s): {message}" for message, count in summary.get("warnings", {}).items()]
    lines += [f"HARNESS ERROR (ours, not thunder's) in {e['item']}: {e['error']}" for e in summary["harness_errors"]]
    return lines
