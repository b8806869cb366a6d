"""No new bug hides behind a known one, nor behind a larger tensor, nor behind a known bug's fix: the injection
matrix's masking, scale-disparity and fixed-op cells (faults go into thunder, tests/faults.py; `make test-full`).

Masking: for each registered entry whose op can carry a fault, a fault in that op and the entry's dtype at 5x the
upper edge of the entry's band, in the band's own metric (|alpha - 1| for a gradient scale), is reported as new.
Scale disparity: a 20% error on a tensor 30-100x smaller than the example's largest is reported.
"""

from dataclasses import replace

import pytest
import thunder
import torch
import torch.nn.functional as F

from fuzz.generate.spec import CheckpointSpec, LayerSpec, NetSpec
from fuzz.judge.verdict import check_spec
from fuzz.model_builder import build_example
from fuzz.registry.files import KNOWN_ISSUES_DIR, recorded_spec
from fuzz.registry.fixes import applied
from fuzz.registry.known_issues import KNOWN_ISSUES
from fuzz.registry.novelty import credited_fixes, fixes_on
from fuzz.registry.signatures import read_entry
from fuzz.run.passes import is_state
from fuzz.run.runner import run_eager, run_reference
from tests.faults import replaced, scaled_gradient, scaled_gradient_in

# Entry -> the torch op its bug is in. Faulted wherever thunder meets the op (in and outside checkpoints), so that
# the failure keeps the entry's triage and differs only in size. Not here: the in-place/view entries (their trigger is
# a mutation pattern, not an op's numbers), the NaN entries (a band of inf: no fault is 5x beyond it), the state and
# random ones, and crashes (matched by their exception, tests/unit/test_known_issue_signatures.py).
MASKING_CELLS = {
    "softmax-bfloat16-grad-inaccurate": torch.softmax,
    "mish-bfloat16-grad-inaccurate": F.mish,
    "hardsigmoid-float64-grad-imprecise": F.hardsigmoid,
    "gelu-after-op-bfloat16-inaccurate": F.gelu,
    "attention-bfloat16-grad-inaccurate": F.scaled_dot_product_attention,
    "max-dim-tie-grad-split": torch.max,  # its layer calls the method: replaced too
}


def _upper_drift(issue_id: str, dtype: str) -> float:
    return max(
        band["drift"][1]
        for signature in read_entry(KNOWN_ISSUES_DIR / issue_id)["signature"]
        for band in signature["band"]
        if band["dtype"] == dtype
    )


@pytest.mark.slow
@pytest.mark.parametrize("issue_id", MASKING_CELLS)
def test_a_fault_five_times_the_band_in_a_known_issues_own_op_is_reported_as_new(issue_id):
    (issue,) = [i for i in KNOWN_ISSUES if i.id == issue_id]
    spec = recorded_spec(issue_id)
    assert issue.reproduced_by(check_spec(spec).failure, spec), "the entry's own bug, inside its band"
    factor = 1 - 5 * _upper_drift(issue_id, spec.dtype)  # the band's own metric: |alpha - 1| (negative past 0.2)
    fault = lambda op: scaled_gradient_in(op, factor, (spec.dtype,))  # noqa: E731
    with replaced(MASKING_CELLS[issue_id], fault, everywhere=True):
        failure = check_spec(spec).failure
    difference = issue.difference(failure, spec)
    print(f"masking | {issue_id} | {spec.dtype} | gradient x{factor:.8g} | {failure and failure.failure_class} | "
          f"{difference}")  # fmt: skip
    assert failure is not None and difference is not None, failure


# Entry with a fix -> the torch op that fix changes (`known_issues/<id>/fix.py`). With every fix applied the entry's
# recorded network passes; a fault in that op (its gradient x2) then fails it again, and is new on the fixed thunder:
# no fix explains it (`fuzz.registry.novelty.credited_fixes`), however close to the fixed bug it sits.
FIXED_OP_CELLS = {
    "softmax-bfloat16-grad-inaccurate": torch.softmax,
    "mish-bfloat16-grad-inaccurate": F.mish,
    "gelu-after-op-bfloat16-inaccurate": F.gelu,
    "layer-norm-bfloat16-grad-inaccurate": F.layer_norm,
    "max-dim-tie-grad-split": torch.max,
    "sigmoid-grad-nan-large-negative": torch.sigmoid,
    "sdpa-fully-masked-row-nan": F.scaled_dot_product_attention,
    "instance-norm-running-stats-not-updated": F.instance_norm,
    "max-pool1d-padding-nan": torch.max_pool1d,
    "pow-zero-exponent-grad-nan": torch.pow,
    "batch-norm-stats-saved-in-checkpoint": F.instance_norm,
    "diagonal-inplace-update-lost": torch.diagonal,
    "inplace-silu-wrong-grad": F.silu,
    "mish-grad-nan-large-input": F.mish,
}
# Not cells: zero-gradient-output-loses-requires-grad's ops (floor, ceil) have a zero gradient, which no scale moves;
# unused-inplace-update-crash's network does not read the layer it fixes; empty-output-loses-requires-grad's output
# is empty (no gradient to scale); nested-checkpoint-crash's and narrow-add-then-next-layer-grad-broken's fixes are
# in no op (the checkpoint converter; each argument's gradient).
# Where the entry's network has no gradient for a fault to scale (pow's exponent 0; a layer norm over 2 features,
# whose outputs are +-1; an instance norm fed by a 1-element input), the fault goes into the same network one step
# away: the exponent 2, 4 or 8 features.
_WITH_A_GRADIENT = {
    "pow-zero-exponent-grad-nan": lambda spec: _with_layer_params(spec, args=[{**_POW_BASE, "tensor": [1]}, 2.0]),
    "layer-norm-bfloat16-grad-inaccurate": lambda spec: replace(spec, features=4),
    "batch-norm-stats-saved-in-checkpoint": lambda spec: replace(spec, features=8),
    # its network returns the base, whose gradient does not pass through the diagonal: return the updated diagonal
    # (the fault's output, a new tensor and no view, also moves the forward: a forward divergence, new all the same)
    "diagonal-inplace-update-lost": lambda spec: _with_layer_params(spec, read="view"),
}
_POW_BASE = {"low": 0.5, "high": 2.0, "offset": 0}


def _with_layer_params(spec: NetSpec, **params) -> NetSpec:
    (layer,) = spec.layers
    return replace(spec, layers=[replace(layer, params={**layer.params, **params})])


@pytest.mark.slow
@pytest.mark.parametrize("issue_id", FIXED_OP_CELLS)
def test_with_every_fix_applied_a_fault_in_a_fixed_bugs_own_op_is_new(issue_id):
    spec, (fixes, stale) = recorded_spec(issue_id), fixes_on(thunder.__version__)
    assert not stale and issue_id in [fix.entry for fix in fixes], stale
    with applied(fixes):
        assert check_spec(spec).failure is None, "the entry's network, fixed"
    spec = _WITH_A_GRADIENT.get(issue_id, lambda spec: spec)(spec)
    with replaced(FIXED_OP_CELLS[issue_id], lambda op: scaled_gradient(op, 2.0), everywhere=True):
        with applied(fixes):
            failure = check_spec(spec).failure
        credited = credited_fixes(spec, fixes, check_spec)
    print(f"fixed masking | {issue_id} | {spec.dtype} | gradient x2 under {len(fixes)} fixes | "
          f"{failure and failure.failure_class} | credited to {credited or 'no fix: new'}")  # fmt: skip
    assert failure is not None and credited == (), failure


def _disparate_spec(dtype: str) -> NetSpec:
    """tanh in a checkpoint, then Linear(8 -> 1) over a batch of 1024: the input's gradient is 30-100x smaller
    than the weight's (a sum over the batch)."""
    layers = [LayerSpec("tanh", {}), LayerSpec("linear", {"out_features": 1, "bias": True})]
    return NetSpec(features=8, layers=layers, checkpoints=[CheckpointSpec(0, 1)], batch=1024, dtype=dtype)


@pytest.mark.slow
@pytest.mark.parametrize("fixed", [False, True], ids=["stock", "every-fix"])
@pytest.mark.parametrize("signed", [False, True], ids=["x0.8", "+-20%"])
@pytest.mark.parametrize("dtype", ["float32", "float64", "bfloat16", "float16"])
def test_a_twenty_percent_error_on_a_tensor_far_smaller_than_the_example_is_reported(dtype, signed, fixed):
    with applied(fixes_on(thunder.__version__)[0] if fixed else []):
        _twenty_percent_error_on_a_small_tensor_is_reported(dtype, signed)


def _twenty_percent_error_on_a_small_tensor_is_reported(dtype: str, signed: bool) -> None:
    spec = _disparate_spec(dtype)
    example = build_example(spec)
    out, grads = run_reference(example) or run_eager(example)
    scales = [out.abs().max().item(), *(g.abs().max().item() for n, g in grads.items() if not is_state(n))]
    disparity = max(scales) / grads["input"].abs().max().item()
    assert 30 <= disparity <= 100, disparity
    assert check_spec(spec).failure is None
    with replaced(torch.tanh, lambda op: scaled_gradient_in(op, 0.8, (dtype,), signed)):
        failure = check_spec(spec).failure
    kind, verdict = "x(1 +- 0.2)" if signed else "x0.8", failure and f"{failure.failure_class} | {str(failure)[:160]}"
    drift = failure and failure.mismatches[0].drift
    print(f"scale disparity | {dtype} | input grad {disparity:.0f}x smaller | tanh grad {kind} | {verdict} | {drift}")
    assert failure is not None and [m.name for m in failure.mismatches] == ["grad of input"], failure
    assert failure.mismatches[0].drift < 0.05 if signed else failure.mismatches[0].drift > 0.15
