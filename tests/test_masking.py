"""No new bug hides behind a known one, nor behind a larger tensor: the injection matrix's masking and scale-disparity
cells (faults go into thunder, tests/faults.py; `make test-full`).

Masking: for each registered entry whose op can carry a fault, a fault in that op and the entry's dtype at 5x the
upper edge of the entry's band, in the band's own metric (|alpha - 1| for a gradient scale), is reported as new.
Scale disparity: a 20% error on a tensor 30-100x smaller than the example's largest is reported.
"""

import pytest
import torch
import torch.nn.functional as F

from fuzz.generate.spec import CheckpointSpec, LayerSpec, NetSpec
from fuzz.judge.harness import check_spec
from fuzz.model_builder import build_example
from fuzz.registry.files import KNOWN_ISSUES_DIR, recorded_spec
from fuzz.registry.known_issues import KNOWN_ISSUES
from fuzz.registry.signatures import read_entry
from fuzz.run.passes import is_state
from fuzz.run.runner import run_eager, run_reference
from tests.faults import replaced, scaled_gradient_in

# Entry -> the torch op its bug is in. Faulted wherever thunder meets the op (in and outside checkpoints), so that
# the failure keeps the entry's triage and differs only in size. Not here: the in-place/view entries (their trigger is
# a mutation pattern, not an op's numbers), the NaN entries (a band of inf: no fault is 5x beyond it), the state and
# random ones, and crashes (matched by their exception, tests/test_known_issue_signatures.py).
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


def _disparate_spec(dtype: str) -> NetSpec:
    """tanh in a checkpoint, then Linear(8 -> 1) over a batch of 1024: the input's gradient is 30-100x smaller
    than the weight's (a sum over the batch)."""
    layers = [LayerSpec("tanh", {}), LayerSpec("linear", {"out_features": 1, "bias": True})]
    return NetSpec(features=8, layers=layers, checkpoints=[CheckpointSpec(0, 1)], batch=1024, dtype=dtype)


@pytest.mark.slow
@pytest.mark.parametrize("signed", [False, True], ids=["x0.8", "+-20%"])
@pytest.mark.parametrize("dtype", ["float32", "float64", "bfloat16", "float16"])
def test_a_twenty_percent_error_on_a_tensor_far_smaller_than_the_example_is_reported(dtype, signed):
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
