"""The op family varies each sample call along argument axes (fuzz.generate.axes): valid by eager's own verdict,
back to the sample on shrinking, counted by axis in the summary."""

import json
import time
from pathlib import Path

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from fuzz.campaign.families import SWEEP
from fuzz.generate import axes, blocks
from fuzz.generate.draws import layer_specs
from fuzz.generate.kind import Incoming
from fuzz.generate.layers import LAYER_KINDS
from fuzz.generate.op_catalog import catalog
from fuzz.generate.ops import render
from fuzz.generate.reduce import reduce_spec
from fuzz.generate.spec import CheckpointSpec, LayerSpec, NetSpec
from fuzz.generate.sweep import sweep_specs
from fuzz.judge.verdict import check_spec
from fuzz.model_builder import build_example
from fuzz.report.html import axes_section
from fuzz.report.op_family import axis_coverage
from fuzz.report.stats import CampaignStats
from fuzz.run.runner import run_eager
from tests.browser import render as render_in_browser
from tests.campaign_runs import run_campaign

SOFTMAX = {"tensor": [2], "low": -1.0, "high": 1.0, "offset": 0}


def _call(op: str, where=lambda call: True):
    return next(call for call in catalog().calls if call.op == op and call.form == "function" and where(call))


def test_a_mutation_is_data_that_goes_back_to_the_sample_exactly():
    params = {"op": "softmax", "form": "function", "target": "torch.softmax", "args": [SOFTMAX], "kwargs": {"dim": 0}}
    found = axes.candidates(params["args"], params["kwargs"])
    assert [m["axis"] for m in found] == sorted((m["axis"] for m in found), key=axes.AXES.index)
    batched = next(m for m in found if m["class"] == "with a batch dim" and m["edits"][-1]["value"] == 0)
    varied = axes.mutated(params, batched)
    assert varied["args"][0]["tensor"] == [2, 2] and varied["kwargs"] == {"dim": 0} and varied["mutation"] == batched
    assert axes.reverted(varied) == params and "mutation" not in axes.reverted(varied)


def test_each_layout_keeps_shape_and_values_range_but_not_the_strides():
    namespace = {"torch": torch, "adapt": blocks.adapt, "spread": blocks.spread, "x": torch.randn(2, 12)}
    for shape in ([3, 2], [2, 3, 2, 2], [2, 3, 1, 2, 2]):
        literal = {"tensor": shape, "low": -1.0, "high": 1.0, "offset": 0}
        for layout in axes.LAYOUTS:
            if (laid_out := axes.laid_out(literal, layout)) is None:
                assert layout == "channels last" and len(shape) == 2
                continue
            tensor = eval(render(laid_out), namespace)
            assert tensor.shape == tuple(shape) and not tensor.is_contiguous(), (layout, shape)
            assert float(tensor.min()) >= -1.0 and float(tensor.max()) <= 1.0
    assert axes.laid_out({**literal, "tensor": [1, 1]}, "transposed") is None
    assert axes.laid_out({**literal, "tensor": []}, "strided") is None
    assert axes.laid_out({**literal, "tensor": [2, 1, 3, 3]}, "channels last") is None  # one channel: contiguous


def test_the_catalog_keeps_what_eager_runs_and_learns_which_integers_are_dims():
    def dims(shape, dim):
        call = _call("softmax", lambda call: call.args[0]["tensor"] == shape and call.kwargs == {"dim": dim})
        return {m["class"] for m in call.mutations if m["axis"] == "dim"}

    # Of a 1-D input the only other dim is its own (-1): a batch dim in front reaches the non-last dim no sample does.
    assert dims([2], 0) == {"with a batch dim"}
    assert dims([2, 2], 1) == {"0", "negative", "with a batch dim"}  # -2 is 0; -1 is the sample's own
    # repeat's integers are sizes: a dim out of range is no error there, so they are never varied as dims.
    assert not [m for call in catalog().calls if call.op == "repeat" for m in call.mutations if m["axis"] == "dim"]
    assert any(m["axis"] == "flag" for m in _call("sum", lambda call: "keepdim" in call.kwargs).mutations)


def test_the_new_axes_vary_dim_lists_scalars_modes_and_partners_where_eager_accepts_them():
    def classes(op, axis, where=lambda call: True):
        return {
            m["class"]
            for call in catalog().calls
            if call.op == op and where(call)
            for m in call.mutations
            if m["axis"] == axis
        }

    # each set of dims of the rank-4 input the sample sums over (0, 1), and those written negative
    assert {"(0,)", "(2, 3)", "(0, 1, 2, 3)", "negative"} <= classes("sum", "dims")
    assert {"zero", "sign flipped", "larger"} <= classes("leaky_relu", "scalar")  # negative_slope
    assert {"size 1", "grown", "batch dim", "0-dim"} <= classes("sigmoid", "shape")
    assert {"reversed", "rotated"} <= classes("permute", "dims")  # a permutation's dims in another order
    assert {"mean", "sum", "none"} <= classes("mse_loss", "choice") and classes("gelu", "choice") == {"none", "tanh"}
    assert "absent" in classes("layer_norm", "optional")  # a positional weight no sample leaves out
    # linear(x, w): the bias another sample passes, appended; group_norm's None weight given
    assert "present" in classes("linear", "optional", lambda call: len(call.args) == 2)
    assert "present" in classes("group_norm", "optional", lambda call: call.args[2] is None)
    unbiased = _call("linear", lambda call: len(call.args) == 2)
    biased = axes.mutated(unbiased.params, next(m for m in unbiased.mutations if m["class"] == "present"))
    assert len(biased["args"]) == 3 and "tensor" in biased["args"][2]
    assert axes.reverted(biased) == unbiased.params  # the appended bias is dropped again
    assert classes("mul", "dtype") == {"float64"}  # not bfloat16: see axes.PARTNER_DTYPES
    # sizes are not dims: expand's list is never varied as dims, softmax's dim never as a scalar
    assert not classes("expand", "dims") and not classes("softmax", "scalar")
    partner = next(m for call in catalog().calls for m in call.mutations if m["axis"] == "dtype")
    literal = partner["edits"][0]["value"]
    namespace = {"torch": torch, "adapt": blocks.adapt, "spread": blocks.spread, "x": torch.randn(2, 12)}
    assert eval(render(literal), namespace).dtype == getattr(torch, literal["dtype"])


@settings(max_examples=30, deadline=None)
@given(st.data())
def test_a_drawn_op_layer_is_a_valid_spec_and_varied_ones_run_eagerly(data):
    calls = [call for call in catalog().calls if call.op in ("softmax", "sum", "abs") and call.kind == "op"]
    layer = data.draw(layer_specs([LAYER_KINDS["relu"]], Incoming(2, 4), op_calls=calls))
    spec = NetSpec.from_json(NetSpec(4, [layer], checkpoints=[CheckpointSpec(0, 1)], batch=2).to_json())
    output, grads = run_eager(build_example(spec))
    assert torch.isfinite(output).all() and grads


def test_reduction_puts_the_sample_back_first():
    call = _call("softmax", lambda call: call.args[0]["tensor"] == [2])
    varied = NetSpec(4, [LayerSpec("op", axes.mutated(call.params, call.mutations[-1]))], batch=2)
    seen = []  # a failure of the op (its plumbing twin passes), whatever its argument
    reduced = reduce_spec(varied, lambda spec: seen.append(spec) or spec.layers[0].kind == "op")
    first_op_candidate = next(spec for spec in seen if spec.layers[0].kind == "op")
    assert first_op_candidate.layers[0].params == call.params
    # Then its tensor arguments shrink (`fuzz.generate.reduce`): the sample's call, in smaller shapes.
    assert reduced.layers[0].params == {**call.params, "args": [{**call.params["args"][0], "tensor": [1]}]}


def test_the_sweep_runs_every_value_class_once_and_the_summary_counts_axes_compiled():
    cases = [spec for spec in sweep_specs("cpu", ["float32"], ops=["softmax"]) if "mutation" in spec.layers[0].params]
    classes = [(s.layers[0].params["mutation"]["axis"], s.layers[0].params["mutation"]["class"]) for s in cases]
    offered = {(m["axis"], m["class"]) for call in catalog().calls if call.op == "softmax" for m in call.mutations}
    assert sorted(classes) == sorted(offered)
    stats = CampaignStats()
    dim_case = next(s for s in cases if s.layers[0].params["mutation"]["axis"] == "dim")
    stats.record(check_spec(dim_case), 1.0)
    coverage = axis_coverage(stats, [call for call in catalog().calls if call.op == "softmax"])
    dim_class = dim_case.layers[0].params["mutation"]["class"]
    assert coverage["by_op"]["softmax"]["dim"]["compiled"] == [dim_class]
    assert "softmax dim" not in coverage["never_varied"] and coverage["never_varied"]["softmax layout"] == (
        "not drawn inside a checkpoint in this run"
    )
    # mul's only dtype case has a 0-dim partner, which crashes thunder (known issue binary-op-zero-dim-tensor-crash)
    crash = next(
        s
        for s in sweep_specs("cpu", ["float32"], ops=["mul"])
        if s.layers[0].params.get("mutation", {}).get("axis") == "dtype"
    )
    stats.record(check_spec(crash), 2.0)
    coverage = axis_coverage(stats, [call for call in catalog().calls if call.op == "mul"])
    assert coverage["never_varied"]["mul dtype"].startswith("drawn, but thunder failed on every network holding it")


def test_the_report_shows_each_ops_axes_ran_and_why_a_pair_never_did(tmp_path):
    calls = [call for call in catalog().calls if call.op == "softmax"]
    stats = CampaignStats()
    dim_case = next(s for s in sweep_specs("cpu", ["float32"], ops=["softmax"]) if "mutation" in s.layers[0].params)
    stats.record(check_spec(dim_case), 1.0)
    coverage = axis_coverage(stats, calls)
    page = tmp_path / "axes.html"
    page.write_text(f"<!DOCTYPE html><html><body>{axes_section(coverage)}</body></html>")
    dom = render_in_browser(page, tmp_path / "axes.png")
    ran = len(coverage["by_op"]["softmax"]["dim"]["compiled"])
    assert f"dim {ran}/{len(coverage['by_op']['softmax']['dim']['classes'])}" in dom and ran == 1
    assert "softmax layout: not drawn inside a checkpoint in this run" in dom
    assert axes_section({}) == ""


def _non_last_dim(params: dict) -> bool:
    rank = max(len(params["args"][0]["tensor"]), 1)
    return params["mutation"]["axis"] == "dim" and params["kwargs"]["dim"] % rank != rank - 1


def _zero_dim(params: dict) -> bool:
    return params["mutation"]["axis"] == "shape" and params["args"][0]["tensor"] == []


def _non_contiguous(params: dict) -> bool:
    return params["mutation"]["axis"] == "layout" and params["args"][0]["layout"] in axes.LAYOUTS


def _without_weight(params: dict) -> bool:
    return params["mutation"]["axis"] == "optional" and params["args"][2] is None


def _mixed_dtype(params: dict) -> bool:
    return params["mutation"]["axis"] == "dtype" and params["args"][1]["dtype"] in axes.PARTNER_DTYPES


@pytest.mark.slow
@pytest.mark.parametrize(
    ("fault", "op", "reached"),
    # A gradient doubled where no OpInfo sample of the op goes: softmax over a non-last dim, sigmoid of a 0-dim input,
    # softmax of a non-contiguous one; layer_norm without its weight; div of tensors of two dtypes. (softmax of a
    # 0-dim input has no gradient to double: a softmax over one element is constant.)
    [
        ("softmax-non-last-dim-grad-x2", "softmax", _non_last_dim),
        ("sigmoid-zero-dim-grad-x2", "sigmoid", _zero_dim),
        ("softmax-non-contiguous-grad-x2", "softmax", _non_contiguous),
        ("layer-norm-without-weight-grad-x2", "layer_norm", _without_weight),
        ("div-mixed-dtype-grad-x2", "div", _mixed_dtype),
    ],
)
def test_a_fault_no_sample_reaches_is_found_through_its_axis_and_shrunk_to_that_argument(tmp_path, fault, op, reached):
    start = time.monotonic()
    run = run_campaign(
        tmp_path,
        "--fuzz-layers",
        "op",
        "--fuzz-ops",
        op,
        "--fuzz-dtypes",
        "float32",
        "--fuzz-families",  # the sweep runs a case per value class (drawn networks with the fault shrink for minutes)
        SWEEP.name,
        "--fuzz-minutes",
        "3",
        "--fuzz-confirm",
        "no",
        fault=fault,
    )
    assert run.returncode == 1, run.stdout[-3000:] + run.stderr[-3000:]
    summary = json.loads((tmp_path / "artifacts" / "latest" / "summary.json").read_text())
    # The fault's failures are checkpoint-specific (it acts inside checkpoints only); a thunder-general one is a real
    # bug another value class reached, to register, and shows here.
    faulty = [failure for failure in summary["failures"] if failure["triage"] == "checkpoint-specific"]
    assert faulty and not summary["harness_errors"], summary["failures"]
    for failure in faulty:  # (several value classes of the axis may reach the fault: each its own case)
        spec = NetSpec.from_json((Path(failure["repro"]).parent / "spec.json").read_text())
        (layer,) = spec.layers
        assert reached(layer.params), spec.to_json()
    assert len(faulty) == len(summary["failures"]), [failure["id"] for failure in summary["failures"]]
    # One bug, however many value classes reached it: one cluster (`fuzz.report.clusters`) over all its folders.
    (cluster,) = summary["clusters"]
    assert cluster["folders"] >= len(faulty), cluster
    shrunk = min(failure["shrunk_after_s"] for failure in faulty)
    print(
        f"{fault}: found after {summary['first_failure']['after_s']} s, first shrunk after {shrunk} s, "
        f"{time.monotonic() - start:.0f} s in all, {len(faulty)} failure(s), {cluster['folders']} folder(s), "
        f"1 cluster: {cluster['label']}; {layer.params}"
    )
