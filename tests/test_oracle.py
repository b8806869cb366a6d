"""The tolerance rule and the classification, on constructed tensors."""

import pytest
import torch

from fuzz.oracle import ForwardDivergence, GradientDivergence, judge
from fuzz.parity import TOLERANCES, mismatch


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
    rtol, atol, floor, _ = TOLERANCES[torch.float32]
    within = 0.9 * atol * 1000
    assert mismatch(expected + torch.tensor([0.0, within]), expected) is None
    assert mismatch(expected + torch.tensor([0.0, 2 * atol * 1000]), expected) is not None


def test_all_zero_tensors_use_the_floor():
    zeros = torch.zeros(8)
    assert mismatch(zeros + 1e-7, zeros) is None
    assert mismatch(zeros + 1e-4, zeros) is not None


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
