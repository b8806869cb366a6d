"""The tolerance rule and the classification, on constructed tensors."""

import pytest
import torch

from fuzz.judge.failures import ForwardDivergence, GradientDivergence, judge
from fuzz.judge.tolerance import TOLERANCES, mismatch


def _tensor(dtype, seed=0):
    return torch.randn(4, 16, generator=torch.Generator().manual_seed(seed)).to(dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_rounding_noise_passes(dtype):
    expected = _tensor(dtype)
    eps = torch.finfo(dtype).eps
    noisy = expected * (1 + 8 * eps * torch.sign(_tensor(dtype, 1)))  # 8 ulps off everywhere
    assert mismatch(noisy, expected) is None


@pytest.mark.parametrize(("dtype", "factor"), [(torch.float32, 1.001), (torch.float64, 1 + 1e-7)])
def test_a_scaled_tensor_fails(dtype, factor):
    expected = _tensor(dtype)
    message = mismatch(expected * factor, expected)
    assert message is not None and message.startswith("max abs diff")


def test_one_bad_element_among_many_fails_and_is_located():
    expected = _tensor(torch.float32)
    actual = expected.clone()
    actual[2, 5] += 0.01
    message = mismatch(actual, expected)
    assert "on 1/64 elements" in message and "flat index 37" in message


def test_near_zero_elements_are_judged_against_the_tensor_scale():
    expected = torch.tensor([1000.0, 1e-3])
    rtol, atol, *_ = TOLERANCES[torch.float32]
    within = 0.9 * atol * 1000
    assert mismatch(expected + torch.tensor([0.0, within]), expected) is None
    assert mismatch(expected + torch.tensor([0.0, 2 * atol * 1000]), expected) is not None


def test_a_low_precision_systematic_scale_inside_elementwise_noise_fails():
    # 1% on every element of a bfloat16 gradient is within one ulp elementwise, but it is a scale.
    reference = _tensor(torch.float64)
    eager = reference.to(torch.bfloat16)
    assert mismatch(eager, eager, reference, 2.0) is None
    message = mismatch((reference * 1.01).to(torch.bfloat16), eager, reference, 2.0)
    assert message is not None and message.startswith("systematic scale error: thunderfx ~ ")
    assert float(message.split("~ ")[1].split(" ")[0]) == pytest.approx(1.01, abs=1e-3)


def test_a_systematic_scale_within_the_drift_of_eager_on_nudged_copies_passes():
    # Eager's own factor on one example can happen to be nearly exact where its drift on the same network with
    # inputs moved by an ulp is larger: thunder is judged against the drift eager shows over the nudged copies.
    reference = _tensor(torch.float64)
    eager = reference.to(torch.bfloat16)
    thunder = (reference * 1.01).to(torch.bfloat16)
    nudged_like_eager = [((reference * factor).to(torch.bfloat16), reference) for factor in (0.998, 1.015, 1.004)]
    assert mismatch(thunder, eager, reference, 2.0, 0.0, nudged_like_eager) is None
    nudged_exact = [((reference * factor).to(torch.bfloat16), reference) for factor in (0.999, 1.001)]
    message = mismatch(thunder, eager, reference, 2.0, 0.0, nudged_exact)
    assert message.startswith("systematic scale error") and "nudged copies drift up to" in message


def test_a_low_precision_threshold_flip_passes_where_the_probe_shows_it_but_two_percent_of_elements_do_not():
    reference = _tensor(torch.float64, 2).flatten()
    eager = reference.to(torch.bfloat16)
    jumps = torch.full_like(reference, 10.0)  # eager on nudged copies moves each element that far: all at a jump
    flipped = eager.clone()
    flipped[7] = 0  # as masked_fill(x > 0.5) does when x rounds to the other side of 0.5
    assert mismatch(flipped, eager, reference, 2.0, jumps) is None
    assert "on 1/64 elements" in mismatch(flipped, eager, reference, 2.0)  # unprobed (random networks): no flip
    flipped[8] = flipped[9] = 0
    assert "on 3/64 elements" in mismatch(flipped, eager, reference, 2.0, jumps)
    far = eager.clone()
    far[7] = 100.0  # a jump larger than the tensor itself is no flip
    assert "on 1/64 elements" in mismatch(far, eager, reference, 2.0, jumps)


def test_a_cancellation_to_zero_is_judged_against_the_example_scale():
    # An attention key bias's gradient is exactly 0, computed as a sum of terms of order S.
    reference = torch.zeros(8, dtype=torch.float64)
    eager = torch.full((8,), 3e-5, dtype=torch.float16)
    thunder = torch.full((8,), 2.7e-4, dtype=torch.float16)
    assert mismatch(thunder, eager, reference, example_scale=1.0) is None
    assert mismatch(thunder, eager, reference, example_scale=0.01) is not None


def test_an_all_zero_truth_is_a_cancellation_judged_against_the_example_scale():
    zeros = torch.zeros(8)
    assert mismatch(zeros + 1e-7, zeros, example_scale=1.0, sensitivity=0.0) is None
    assert mismatch(zeros + 1e-7, zeros, example_scale=0.0, sensitivity=0.0) is not None
    assert mismatch(zeros + 1e-4, zeros, example_scale=1.0, sensitivity=0.0) is not None


def test_a_clean_small_tensor_is_judged_on_its_own_scale_beside_a_large_one():
    # A bfloat16 gradient of scale 3 whose largest element is 20% off, in an example of scale 100: eps S = 0.78 would
    # cover the 0.6 error; eager's own error on it (one rounding) shows no cancellation, so S plays no part.
    reference = torch.linspace(-3, 3, 64, dtype=torch.float64)
    eager = reference.to(torch.bfloat16)
    thunder = eager.clone()
    thunder[0] = thunder[0] * 0.8
    clean = [((reference * (1 + 1e-3)).to(torch.bfloat16), reference)] * 3
    found = mismatch(thunder, eager, reference, 100.0, 0.0, clean)
    assert found is not None and "judged on its own scale" in found
    assert mismatch(eager, eager, reference, 100.0, 0.0, clean) is None
    # Where eager's own error shows a cancellation (here 1.5x the tensor's scale on nudged copies), it is noise.
    noisy = [((reference * 2.5).to(torch.bfloat16), reference)] * 3
    assert mismatch(thunder, eager, reference, 100.0, 0.0, noisy) is None


def test_a_tiny_float32_tensor_has_a_relative_floor():
    # An absolute floor of 1e-6 used to let a whole tensor of scale 2e-7 be 100% wrong.
    reference = torch.linspace(-2e-7, 2e-7, 16, dtype=torch.float64)
    eager = reference.float()
    assert mismatch(eager, eager, reference, 1.0, 0.0) is None
    assert mismatch(eager * 2, eager, reference, 1.0, 0.0) is not None


def test_non_finite_shape_dtype_and_missing_gradients_fail():
    expected = torch.ones(3)
    assert "non-finite" in mismatch(torch.tensor([1.0, float("nan"), 1.0]), expected)
    assert "shape/dtype" in mismatch(torch.ones(4), expected)
    assert "shape/dtype" in mismatch(torch.ones(3, dtype=torch.float64), expected)
    assert "no gradient under thunderfx" in mismatch(None, expected)
    assert "where eager has none" in mismatch(expected, None)
    assert mismatch(None, None) is None


def test_judge_classifies_forward_before_gradients():
    out, grad = torch.ones(2), torch.ones(3)
    eager = (out, {"input": grad, "layer0.weight": grad})
    assert judge((out.clone(), {"input": grad.clone(), "layer0.weight": grad.clone()}), eager) is None
    bad_grad = judge((out.clone(), {"input": grad.clone(), "layer0.weight": grad * 2}), eager)
    assert isinstance(bad_grad, GradientDivergence) and "grad of layer0.weight" in str(bad_grad)
    bad_both = judge((out * 2, {"input": grad * 2, "layer0.weight": grad}), eager)
    assert isinstance(bad_both, ForwardDivergence) and "output" in str(bad_both) and "grad of input" in str(bad_both)


def test_a_float64_drift_within_one_ulp_of_the_example_scale_passes_where_a_float32_twin_shows_a_cancellation():
    # center -> gelu -> dot products in float64: thunder's input gradient (scale 1.9e-7, example scale 8.4) is
    # off by 2.2e-16, one ulp of the example's scale, which is a least-squares drift of 1.1e-9; the same network in
    # float32 is off by about one float32 ulp of S there, 5x the tensor's scale.
    eager = torch.linspace(-1.9e-7, 1.9e-7, 57, dtype=torch.float64)
    drifted = eager + 2.2e-16 * torch.sign(eager)
    ratio = torch.finfo(torch.float64).eps / torch.finfo(torch.float32).eps
    twin_error = 1e-6 * torch.sign(torch.sin(torch.arange(57.0))).double()
    cancelled = [(eager + twin_error * ratio, eager)] * 3
    assert mismatch(drifted, eager, example_scale=8.4, sensitivity=0.0, nudged=cancelled) is None
    assert mismatch(eager * 2, eager, example_scale=8.4, sensitivity=0.0, nudged=cancelled) is not None
    clean = [(eager * (1 + 1e-16), eager)] * 3  # no cancellation shown: judged on its own scale
    assert mismatch(drifted, eager, example_scale=8.4, sensitivity=0.0, nudged=clean) is not None


def test_the_relative_error_measure_floors_a_rounding_zero_by_the_example_scale():
    """A gradient zero up to rounding (1e-30 in the reference) beside unit values: thunderfx's 1e-17 there is
    rounding, not a relative error of 1e13 (what `ckpt-fuzz check`'s PASS line printed); a real error still shows."""
    from fuzz.judge.outcome import relative_error

    truth = (torch.ones(3, dtype=torch.float64), {"w": torch.full((2,), 1e-30, dtype=torch.float64)})
    noise = (torch.ones(3), {"w": torch.full((2,), 1e-17)})
    assert relative_error(noise, truth) < 1e-6
    wrong = (torch.ones(3), {"w": torch.full((2,), 0.5)})
    assert relative_error(wrong, truth) > 0.1
