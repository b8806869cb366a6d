"""The summary's text and data: each bug once, warnings counted once, the result line and the replay options."""

from pathlib import Path

from fuzz.campaign.config import CampaignConfig
from fuzz.report.stats import CampaignStats
from fuzz.report.summary import ItemResults, build_summary, summary_lines


def _failure(identifier: str, message: str) -> dict:
    return {
        "id": identifier,
        "class": "thunder-crash",
        "triage": "thunder-general",
        "message": message,
        "repro": f"/runs/r/{identifier}/repro.py",
        "shrunk_after_s": 1.0,
        "after_examples": 3,
        "confirmed": True,
        "confirmation": "reproduced",
        "confirmation_seconds": 1.0,
        # `fuzz.report.clusters.cluster_of`: the cluster of a crash is its signature (and ops, class, triage)
        "cluster": message[:8],
        "cluster_label": f"thunder-crash [thunder-general] in tanh: {message}",
        "size": len(identifier),
    }


def test_networks_failing_the_same_way_are_one_cluster_and_warnings_are_counted_once_each():
    stats = CampaignStats()
    stats.failures = [_failure("a", "RuntimeError: boom"), _failure("b", "RuntimeError: boom"), _failure("c", "other")]
    stats.failures.append(_failure("a", "RuntimeError: boom"))  # a second shard shrank to the same network
    variant = _failure("a", "RuntimeError: boom") | {"repro": "/runs/r/a/variants/9f/repro.py"}
    stats.failures.append(variant)  # another network of the same bug: listed under it, not on its own
    items = ItemResults()
    for _ in range(5):
        items.record_warning("UserWarning: determinism_check is not supported in Thunder\nmore")
    config = CampaignConfig(run_dir=Path("/runs/r"), run_id="r", command="ckpt-fuzz run", kinds=("tanh", "relu"))
    summary = build_summary(config, stats, items, wall_s=10.0)
    summary["result"] = items.result(1, summary)
    lines = "\n".join(summary_lines(summary))
    assert lines.count("FAILURE ") == 2 and "3 folder(s), found 4 time(s); smallest a [" in lines
    assert [(c["members"], c["folders"]) for c in summary["clusters"]] == [(["a", "b"], 3), (["c"], 1)]
    assert [(f["id"], f["variants"]) for f in summary["failures"]][0] == ("a", [variant["repro"]])
    assert "the same in 1 other network(s): b" in lines
    assert "warning, in 5 test item(s): UserWarning: determinism_check is not supported in Thunder" in lines
    assert lines.startswith("run r: ckpt-fuzz run") and lines.endswith("result: failed: 3 failure(s)")
    assert summary["replay_options"]["fuzz-layers"] == "tanh,relu" and summary["replay_options"]["fuzz-ops"] is None


def test_report_against_an_earlier_run_says_which_clusters_are_new_gone_and_changed(tmp_path):
    """`ckpt-fuzz report --against`: clusters compared by id; "previous" is the latest earlier run of the same
    command; a run that is not there is a one-line error."""
    import json

    import pytest

    from fuzz.report.clusters import CHANGES, compare_runs

    def run(run_id: str, failures: list[dict], command: str = "ckpt-fuzz run") -> Path:
        (tmp_path / run_id).mkdir()
        (tmp_path / run_id / "summary.json").write_text(json.dumps({"command": command, "failures": failures}))
        return tmp_path / run_id

    run("20261201-000000-a", [_failure("a", "RuntimeError: boom"), _failure("c", "old bug")])
    run("20261201-120000-k", [], command="ckpt-fuzz known-issues")  # not a campaign: not "previous"
    later = run("20261202-000000-b", [_failure("a", "RuntimeError: boom"), _failure("b", "RuntimeError: boom")])
    later_failures = json.loads((later / "summary.json").read_text())["failures"]
    (later / "summary.json").write_text(
        json.dumps({"command": "ckpt-fuzz run", "failures": [*later_failures, _failure("n", "new one")]})
    )
    lines = compare_runs(later, tmp_path, "previous")
    assert lines[0] == "clusters since 20261201-000000-a: 1 new, 1 gone, 1 changed", lines
    assert any(line.startswith("  CHANGED") and "1 -> 2 folder(s)" in line for line in lines)
    assert json.loads((later / CHANGES).read_text())["earlier"] == "20261201-000000-a"
    with pytest.raises(FileNotFoundError, match="no run folder with a summary.json at nowhere"):
        compare_runs(later, tmp_path, "nowhere")


def test_a_models_failure_has_a_cluster_named_by_its_architecture():
    # A model spec has no layers: its cluster is its architecture's (a ZooModel in the label once failed a 15-minute
    # campaign's gpt2 finding with a harness error while its folder was written).
    from fuzz.generate.architectures import ZooModel
    from fuzz.generate.zoo import zoo_spec
    from fuzz.judge.failures import GradientDivergence
    from fuzz.report.clusters import cluster_of

    spec = zoo_spec(ZooModel("gpt2", heads=1, head_size=2, intermediate=4, checkpointing=False), vocab=8, seq=2)
    cluster = cluster_of(spec, GradientDivergence("grad of input"))
    assert "in gpt2:" in cluster["cluster_label"] and len(cluster["cluster"]) == 8


def test_every_statistic_is_written_read_back_and_merged_by_its_own_rule():
    def process(examples: int, startup_s: float, first_example_s: float) -> CampaignStats:
        stats = CampaignStats(examples=examples, startup_s=startup_s, first_example_s=first_example_s)
        stats.failing_examples["gradient-divergence"] += 1
        stats.known_issues["pow-zero-exponent-grad-nan"][0] += 1
        stats.op_axis_coverage["pow\texponent\tzero"][2] += 1
        stats.saved_reasons["linear"]["intermediate"] += 8
        stats.saved_reasons["linear"]["eager"] += 0  # a reason of 0 bytes is still a reason
        stats.op_first_compiled_s["pow"] = startup_s
        return stats

    first, second = process(3, 5.0, 1.0), process(4, 2.0, 9.0)
    first.checkpoint_grid["tanh\tcheckpoint\tfloat32"][0] += 1  # a key the other process lacks
    written = first.to_dict()
    assert written["failing_examples_by_class"] == {"gradient-divergence": 1}  # a field's own key in summary.json
    assert CampaignStats.from_dict(written).to_dict() == written
    first.merge(second)
    assert second.to_dict() == process(4, 2.0, 9.0).to_dict(), "a merge leaves the other process's statistics alone"
    merged = first.to_dict()
    assert merged["examples"] == 7 and merged["failing_examples_by_class"] == {"gradient-divergence": 2}
    assert merged["known_issues"] == {"pow-zero-exponent-grad-nan": [2, 0]}
    assert merged["op_axis_coverage"] == {"pow\texponent\tzero": [0, 0, 2]}
    assert merged["saved_reasons"] == {"linear": {"eager": 0, "intermediate": 16}}
    assert merged["op_first_compiled_s"] == {"pow": 2.0}
    assert (merged["startup_s"], merged["first_example_s"]) == (2.0, 9.0)  # the earliest process's, as one pair
    # An older run's summary lacks later keys (and wrote two counts per op axis): they start empty, or padded.
    old = {key: value for key, value in written.items() if key not in ("fix_rejudge_s", "known_by_fix")}
    old["op_axis_coverage"] = {"pow\texponent\tzero": [0, 0]}
    assert CampaignStats.from_dict(old).op_axis_coverage["pow\texponent\tzero"] == [0, 0, 0]
