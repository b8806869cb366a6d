"""No new bug hides behind a known one: a fault in a registered entry's own op and dtype, at 5x the upper edge of the
entry's band, is reported as new (the injection matrix's masking cells; faults go into thunder, tests/faults.py)."""

import pytest
import torch
import torch.nn.functional as F

from fuzz.harness import check_spec
from fuzz.known_issue_files import KNOWN_ISSUES_DIR, recorded_spec
from fuzz.known_issue_signatures import read_entry
from fuzz.known_issues import KNOWN_ISSUES
from tests.faults import replaced, scaled_gradient_in

# Entries whose op runs inside a checkpoint of their registered spec, where a fault in thunder's op can act.
MASKING_CELLS = {
    "softmax-bfloat16-grad-inaccurate": torch.softmax,
    "mish-bfloat16-grad-inaccurate": F.mish,
    "hardsigmoid-float64-grad-imprecise": F.hardsigmoid,
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
    factor = 1 - min(0.9, 5 * _upper_drift(issue_id, spec.dtype))  # the band's own metric: |alpha - 1|
    with replaced(MASKING_CELLS[issue_id], lambda op: scaled_gradient_in(op, factor, (spec.dtype,))):
        failure = check_spec(spec).failure
    print(f"{issue_id}: gradient x{factor:.6g} in {spec.dtype}: {failure.failure_class}, {str(failure)[:300]}")
    assert failure is not None and not issue.reproduced_by(failure, spec), failure
