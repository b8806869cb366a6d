"""A known issue claims one bug: its recorded signature and band, never its whole class of failures."""

import subprocess
import sys

import pytest

import fuzz.registry.files
from fuzz.generate.spec import LayerSpec, NetSpec
from fuzz.judge.roles import tensor_role
from fuzz.registry.files import KNOWN_ISSUES_DIR, add_reproduction
from fuzz.registry.known_issues import KNOWN_ISSUES
from fuzz.registry.signatures import (
    MARGIN,
    Observation,
    read_entry,
    resemblance,
    with_other_devices,
)
from tests.campaign_runs import ROOT

_BAND = {"dtype": "bfloat16", "device": "cpu", "thunder": "0.2.6", "reproductions": 3}
ENTRY = {
    "signature": [
        {
            "class": "gradient-divergence",
            "triage": "thunder-general",
            "crash": "",
            "roles": ["grad of input", "grad of linear.weight"],
            "band": [{**_BAND, "error": [0.2, 0.3], "drift": [0.05, 0.1]}],
        },
        {
            "class": "thunder-crash",
            "triage": "thunder-general",
            "crash": "RuntimeError: shape [#] is invalid",
            "roles": [],
            "band": [{**_BAND, "dtype": "float32", "error": [0.0, 0.0], "drift": [0.0, 0.0]}],
        },
    ]
}


def _divergence(*tensors, dtype="bfloat16", triage="thunder-general", device="cpu") -> Observation:
    return Observation("gradient-divergence", triage, "", tuple(tensors), dtype, device)


def _crash(signature: str) -> Observation:
    return Observation("thunder-crash", "thunder-general", signature, (), "float32", "cpu")


@pytest.mark.parametrize(
    ("seen", "difference"),
    [
        (_divergence(("grad of input", 0.25, 0.08)), None),
        (_divergence(("grad of input", 0.3 * MARGIN, 0.1 * MARGIN), ("grad of linear.weight", 0.2 / MARGIN, 0)), None),
        (_divergence(("grad of input", 0.3 * MARGIN * 1.01, 0.08)), "grad of input: error 0.606 outside the band"),
        (_divergence(("grad of input", 0.25, 0.21)), "grad of input: drift 0.21 above the band's 0.2"),
        (_divergence(("grad of input", 0.09, 0.0)), "error 0.09 outside the band [0.1, 0.6]"),
        (_divergence(("output", 0.25, 0.08)), "other tensors diverge (output)"),
        (_divergence(("grad of input", 0.25, 0.08), dtype="float16"), "no band recorded for float16"),
        (_divergence(("grad of input", 0.25, 0.08), device="cuda"), None),  # the CPU band stands in
        (_divergence(("grad of input", 0.25, 0.08), triage="checkpoint-specific"), "another class or triage"),
        (_crash("RuntimeError: shape [#] is invalid"), None),
        (_crash("RuntimeError: shape [#, #, #] is invalid"), None),  # another rank, the same crash
        (_crash("AssertionError: "), "another crash"),
        (_divergence(), "no diverging tensor measured"),  # a self-consistency failure matches no band of tensors
    ],
)
def test_a_failure_is_the_entrys_only_when_its_signature_matches_inside_the_band(seen, difference):
    found = resemblance(ENTRY, seen)
    assert found == difference if difference is None else difference in found, found


def test_recording_on_one_device_keeps_the_bands_another_device_recorded():
    cuda_band = {**_BAND, "device": "cuda", "error": [0.5, 0.9], "drift": [0.1, 0.2]}
    previous = [
        dict(ENTRY["signature"][0], band=[*ENTRY["signature"][0]["band"], cuda_band], roles=["output"]),
        dict(ENTRY["signature"][1], band=[{**ENTRY["signature"][1]["band"][0], "device": "cuda"}]),
    ]
    recorded = [dict(ENTRY["signature"][0], band=[{**_BAND, "error": [0.1, 0.2], "drift": [0.0, 0.1]}])]
    merged = with_other_devices(recorded, previous, "cpu")
    assert [s["class"] for s in merged] == ["gradient-divergence", "thunder-crash"]
    assert [(b["device"], b["error"]) for b in merged[0]["band"]] == [("cpu", [0.1, 0.2]), ("cuda", [0.5, 0.9])]
    assert merged[0]["roles"] == ["grad of input", "grad of linear.weight", "output"]
    assert [b["device"] for b in merged[1]["band"]] == ["cuda"]
    assert recorded[0]["band"] == [{**_BAND, "error": [0.1, 0.2], "drift": [0.0, 0.1]}]  # not changed in place


def test_tensor_roles_name_the_layer_kind_or_op_not_positions_or_sizes():
    spec = NetSpec(
        features=4,
        layers=[LayerSpec("linear", {"out_features": 3, "bias": True}), LayerSpec("op", {"op": "softmax"})],
    )
    roles = {name: tensor_role(spec, name) for name in ("output", "grad of input", "grad of layer0.weight")}
    assert roles == {
        "output": "output",
        "grad of input": "grad of input",
        "grad of layer0.weight": "grad of linear.weight",
    }
    assert tensor_role(spec, "buffer layer0.running_mean after forward") == "state"
    assert tensor_role(spec, "grad of model.layers.1.mlp.weight") == "grad of model.layers.#.mlp.weight"
    assert tensor_role(spec, "self-consistency") == "self-consistency"  # a random model's one measured number


@pytest.mark.parametrize("issue", [i for i in KNOWN_ISSUES if not i.slow], ids=lambda issue: issue.id)
def test_every_entry_has_a_recorded_signature_of_its_own_classes(issue):
    entry = read_entry(KNOWN_ISSUES_DIR / issue.id)
    assert entry is not None, f"no entry.toml: run `ckpt-fuzz known-issues --record {issue.id}`"
    text = (KNOWN_ISSUES_DIR / issue.id / "entry.toml").read_text()
    assert "Written by `ckpt-fuzz known-issues --record`" in text
    assert entry["signature"] and all(s["class"] in issue.failure_classes for s in entry["signature"])
    assert all(band["reproductions"] >= 1 for s in entry["signature"] for band in s["band"])


def test_recording_an_unknown_entry_is_a_one_line_error():
    run = subprocess.run(
        [sys.executable, "-m", "fuzz.cli", "known-issues", "--record", "no-such-issue"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 4 and run.stderr.strip() == (
        f"ckpt-fuzz known-issues --record: no known issue no-such-issue in {KNOWN_ISSUES_DIR}"
    )


def test_a_campaign_failure_is_admitted_as_a_reproduction_only_when_the_trigger_explains_it(tmp_path, monkeypatch):
    from tests.faults import injected
    from tests.unit.test_verdicts import SILU_THEN_TANH

    monkeypatch.setattr(fuzz.registry.files, "KNOWN_ISSUES_DIR", tmp_path / "registry")
    (tmp_path / "registry" / "inplace-silu-wrong-grad").mkdir(parents=True)
    folder = tmp_path / "failure"
    folder.mkdir()
    (folder / "spec.json").write_text(SILU_THEN_TANH.to_json())
    (issue,) = [i for i in KNOWN_ISSUES if i.id == "inplace-silu-wrong-grad"]
    stored = add_reproduction(issue, folder)
    assert NetSpec.from_json(stored.read_text()) == SILU_THEN_TANH
    with injected("tanh-grad-x2"), pytest.raises(ValueError, match="still fails without inplace-silu-wrong-grad's"):
        add_reproduction(issue, folder)  # a second bug beside the entry's: not its reproduction
