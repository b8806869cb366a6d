"""The model-zoo family (`fuzz.generate.zoo`): tiny transformers models with gradient checkpointing, as plain-data
specs."""

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from hypothesis import HealthCheck, given, settings

from fuzz.generate.architectures import ARCHITECTURES, ZooModel
from fuzz.generate.spec import NetSpec, SpecError
from fuzz.generate.zoo import SEED_MODEL, zoo_spec, zoo_specs
from fuzz.judge.failures import GradientDivergence
from fuzz.judge.verdict import check_spec
from fuzz.model_builder import build_example
from fuzz.report.repro import repro_source
from fuzz.run.runner import run_eager
from tests.campaign_runs import run_repro
from tests.faults import injected, replaced, scaled_gradient_in

ROOT = Path(__file__).resolve().parents[2]

transformers = pytest.importorskip("transformers")


def test_every_architecture_names_real_transformers_classes():
    assert {"llama", "mistral", "qwen2", "gemma", "gpt2", "phi", "bert"} <= set(ARCHITECTURES)
    for arch in ARCHITECTURES.values():
        assert getattr(transformers, arch.config_class) and getattr(transformers, arch.model_class)


@settings(max_examples=25, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(spec=zoo_specs())
def test_every_drawn_model_is_valid_and_runs_eagerly(spec: NetSpec):
    assert NetSpec.from_json(spec.to_json()) == spec
    example = build_example(spec)
    output, grads = run_eager(example)
    assert output.shape == spec.output_shape and torch.isfinite(output.float()).all()
    names = [name for name, _ in example.net.named_parameters()]
    assert names == [name for name, _ in build_example(spec, checkpointing=False).net.named_parameters()]
    # BertForMaskedLM's `cls.predictions.bias` is a leftover of its decoder's bias that transformers 5 no longer uses.
    assert {name for name in names if grads[name] is None} <= {"model.cls.predictions.bias"}
    assert example.net.model.is_gradient_checkpointing == spec.model.checkpointing


def test_the_spec_records_architecture_and_config_as_plain_data():
    data = json.loads(SEED_MODEL.to_json())
    assert data["model"] == {
        "arch": "llama",
        "layers": 2,
        "heads": 4,
        "head_size": 8,
        "kv_heads": 2,
        "intermediate": 64,
        "dropout": 0.0,
        "attention": "eager",
        "tied": False,
        "checkpointing": True,
    }
    assert data["layers"] == [] and data["vocab"] == 64 and data["seq"] == 8


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"arch": "t5"}, "model.arch 't5' is not one of llama"),
        ({"kv_heads": 3}, "model.kv_heads 3: must divide heads"),
        ({"arch": "gpt2", "head_size": 8, "kv_heads": 2}, "gpt2 has no grouped-query attention"),
        ({"arch": "phi", "head_size": 2, "kv_heads": 4}, "phi needs a multiple of 4"),
        ({"dropout": 0.1, "checkpointing": False}, "model.dropout needs checkpointing"),
        ({"attention": "flash"}, "model.attention 'flash' is not one of eager, sdpa"),
        ({"layers": 0}, "model.layers must be a positive integer"),
    ],
)
def test_an_invalid_model_is_a_one_line_spec_error(change: dict, message: str):
    data = json.loads(SEED_MODEL.to_json())
    data["model"].update(change)
    with pytest.raises(SpecError, match=message):
        NetSpec.from_dict(data)


def test_a_model_spec_holds_no_layers_of_its_own():
    data = json.loads(SEED_MODEL.to_json())
    data["layers"] = [{"kind": "tanh", "params": {}, "frozen": False}]
    with pytest.raises(SpecError, match="no layers or checkpoints of its own"):
        NetSpec.from_dict(data)


@pytest.mark.slow
def test_a_gradient_fault_inside_the_models_checkpoints_is_found_and_its_repro_reproduces(tmp_path):
    """An SDPA gradient fault in thunder's checkpointed regions: found in a Llama, checkpoint-specific; the repro
    (plain transformers + torch + thunder, run outside this package) exits 1 with the fault and 0 without."""
    spec = zoo_spec(
        ZooModel("llama", heads=2, head_size=2, kv_heads=1, intermediate=4, attention="sdpa"), vocab=8, seq=3
    )
    with injected("sdpa-grad-x2"):
        outcome = check_spec(spec)
    assert outcome.failure is not None, "the fault went unnoticed"
    assert outcome.failure.failure_class == "gradient-divergence"
    assert outcome.failure.triage == "checkpoint-specific"
    assert outcome.checkpoints_compiled  # thunder ran both checkpointed layers; only mask code fell back
    repro = tmp_path / "repro.py"
    repro.write_text(repro_source(spec, outcome.failure, "fixed"))
    assert "import transformers" in repro.read_text() and "import fuzz" not in repro.read_text()
    with_fault = run_repro(repro, "sdpa-grad-x2")
    assert with_fault.returncode == 1, with_fault.stdout[-2000:] + with_fault.stderr[-2000:]
    without = run_repro(repro, None)
    assert without.returncode == 0, without.stdout[-2000:] + without.stderr[-2000:]


def test_without_checkpointing_the_same_fault_is_invisible():
    """The fault acts only in checkpointed regions: the same model without gradient checkpointing passes."""
    model = ZooModel("llama", heads=2, head_size=2, kv_heads=1, intermediate=4, attention="sdpa", checkpointing=False)
    with injected("sdpa-grad-x2"):
        outcome = check_spec(zoo_spec(model, vocab=8, seq=3))
    assert outcome.valid and outcome.failure is None, outcome.failure


def test_a_float64_model_is_judged_by_float32s_rules_where_transformers_computes_in_float32():
    """Found in a 20-minute campaign on thunder 0.2.6 as a thunder-general gradient divergence: gemma's float64 query
    and key gradients, of scale 1e-6, 5.6e-8 off (relative): transformers computes the attention softmax (and the
    norms, the rotary embedding) in float32, eager and thunderfx alike, so they carry float32's rounding."""
    model = ZooModel("gemma", heads=1, head_size=2, kv_heads=1, intermediate=1, layers=1)
    spec = zoo_spec(model, vocab=2, seq=5, dtype="float64")
    assert spec.precision == "float32" and zoo_spec(model, vocab=2, seq=5, dtype="float32").precision == "float32"
    outcome = check_spec(spec)
    assert outcome.valid and outcome.failure is None, outcome.failure
    checkpointed = zoo_spec(replace(model, attention="sdpa", checkpointing=True), vocab=2, seq=5, dtype="float64")
    with injected("sdpa-grad-x2"):  # a wrong gradient still is one
        assert isinstance(check_spec(checkpointed).failure, GradientDivergence)


@pytest.mark.slow
def test_the_self_consistency_check_tells_a_wrong_gradient_from_a_right_one():
    """The oracle of random models (docs/oracle.md): thunder's gradient against central differences of its own
    forward is no failure on a sound model and fails once thunder's SDPA gradient inside the checkpoints is doubled.
    This Llama's RMSNorm computes in float32, so its loss is rough for central differences: eager's own disagreement
    (1.5e-4 relative) makes the sound model's check inconclusive instead of a false failure."""
    from fuzz.judge.failures import GradientDivergence
    from fuzz.judge.self_consistency import self_consistent
    from fuzz.judge.thunder_runs import ThunderRuns

    spec = zoo_spec(
        ZooModel("llama", heads=2, head_size=2, kv_heads=1, intermediate=4, attention="sdpa"), vocab=8, seq=3
    )
    sound = self_consistent(spec, ThunderRuns(300, False), "fixed")
    assert sound is True or "too rough here to judge" in sound, sound
    with injected("sdpa-grad-x2"):
        verdict = self_consistent(spec, ThunderRuns(300, False), "fixed")
    print(f"self-consistency: sound {sound!r}; doubled SDPA gradient {verdict}")
    assert isinstance(verdict, GradientDivergence), verdict
    assert "not the derivative of its own forward" in str(verdict)


@pytest.mark.slow
def test_a_bfloat16_only_fault_in_a_random_model_is_found_in_its_own_dtype():
    """A random model (dropout) whose thunder SDPA gradient is doubled in bfloat16 only, inside its checkpoints:
    the self-consistency check runs in float64, where the fault is not; the model without its dropout, judged in
    bfloat16 against eager like any deterministic model, finds it."""
    model = ZooModel("llama", heads=2, head_size=2, kv_heads=1, intermediate=4, attention="sdpa", dropout=0.1)
    spec = zoo_spec(model, vocab=8, seq=3, dtype="bfloat16")
    bfloat16_only = lambda op: scaled_gradient_in(op, 2.0, ("bfloat16",))  # noqa: E731
    with replaced(F.scaled_dot_product_attention, bfloat16_only):
        outcome = check_spec(spec)
    print(f"zoo bfloat16-only fault: {outcome.failure!r}")
    assert isinstance(outcome.failure, GradientDivergence), outcome.failure or outcome.invalid_reason
    assert str(outcome.failure.__cause__).startswith("in the network without its random layers: ")
    assert outcome.failure.triage == "checkpoint-specific"


def test_each_architectures_test_has_its_own_database_key():
    """The zoo's test is pytest-parametrized by architecture, so Hypothesis keys each architecture's examples by its
    node id: replaying another's saved failure (which then passes) never deletes it. Read from Hypothesis's own key
    of each item (what the database holds after one example of each architecture's item, in a real campaign, would
    need a model compile each: the item ids are what the key is made from)."""
    from fuzz.campaign.families import LEGACY_KEYS, ZOO
    from fuzz.generate.architectures import ARCHITECTURES

    listing = subprocess.run(
        [sys.executable, "-m", "pytest", "fuzz/test_ckpt_grad_parity.py", "--collect-only", "-q", "--fuzz-device",
         "cpu", "--fuzz-families", ZOO.name],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    ).stdout  # fmt: skip
    items = [line for line in listing.splitlines() if f"::{ZOO.test}[" in line]
    assert items == [f"fuzz/test_ckpt_grad_parity.py::{ZOO.test}[{arch}]" for arch in ARCHITECTURES], listing
    old_keys = {LEGACY_KEYS[f"{ZOO.name}[{arch}]"] for arch in ARCHITECTURES}
    assert len(old_keys) == len(ARCHITECTURES)  # each architecture's old key moves to its own
