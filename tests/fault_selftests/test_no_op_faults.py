"""A bug that lives in no op is one cluster: faults that are no op's (thunderfx stops recomputing its checkpoints; the
checkpoint converter gets every node it replaces wrong) found by a real campaign in whatever ops its networks hold,
each failure reduced until a stand-in of the same shape sits in every op's place (`fuzz.generate.reduce`), are one
cluster "... in no op" (`make test-full`)."""

import json

import pytest

from fuzz.generate.reduce import STAND_IN
from fuzz.generate.spec import NetSpec
from fuzz.report.clusters import clusters
from tests.campaign_runs import run_campaign

# Each fault, and the class of its failures.
NO_OP_FAULTS = {"checkpoints-dropped": "memory", "converted-nodes-grad-x1.01": "gradient-divergence"}


@pytest.mark.slow
@pytest.mark.parametrize("fault", NO_OP_FAULTS)
def test_a_fault_in_no_op_is_one_cluster_in_no_op_whatever_ops_it_was_found_with(tmp_path, fault):
    # Bounded by examples (the dev profile's, seed 1), not minutes: each failure is reduced on a loaded machine too.
    run = run_campaign(tmp_path, "--hypothesis-profile", "dev", "--fuzz-seed", "1", fault=fault, workers=2)
    assert run.returncode == 1, run.stdout[-3000:] + run.stderr[-3000:]
    folder = tmp_path / "artifacts" / "latest"
    failures = json.loads((folder / "summary.json").read_text())["failures"]
    faults = [f for f in failures if f["class"] == NO_OP_FAULTS[fault] and not f.get("unshrunk")]
    found = [f["cluster_label"] for f in faults]
    shards = sum(f.get("found_by_shards", 1) for f in faults)
    print(f"{fault}: {len(faults)} failures found {shards} times, clusters {sorted(set(found))}")
    assert shards >= 2, failures  # (four shards, each with its own networks: more than one found it)
    (cluster,) = clusters(faults)
    assert "in no op" in cluster["label"], found
    for failure in faults:
        spec = NetSpec.from_json((folder / failure["id"] / "spec.json").read_text())
        assert {layer.kind for layer in spec.layers} == {STAND_IN}, spec.to_json()
