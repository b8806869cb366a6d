"""mish is computed in float32 for float16 and bfloat16 inputs and rounded once, as eager's mish kernels do (their
opmath type), so its gradient is too."""

WHY = (
    "thunder's mish (thunder/torch/__init__.py) is a * tanh(log1p(exp(a))) in the input's dtype: in bfloat16 each of "
    "the four ops rounds its result, and autodiff's backward rounds each step again, so the gradient drifts (an "
    "embedding-weight gradient 0.976x float64, 4.2x eager's error). Eager's mish and mish_backward compute in float32 "
    "for half types and round once. The fix converts the input to the computation dtype, computes mish there, and "
    "converts the result back: one rounding forward, and the backward's float32 gradient rounded once."
)
EDITS = [
    Edit(
        "thunder.torch",
        old="""    out = a * tanh(log1p(exp(a)))
    if inplace:
        return _copy_(a, out)
    return out
""",
        new="""    a_acc = to(a, utils.get_computation_dtype(a.dtype))  # eager's opmath: float32 for half types, rounded once
    out = to(a_acc * tanh(log1p(exp(a_acc))), a.dtype)
    if inplace:
        return _copy_(a, out)
    return out
""",
    )
]
THUNDER_TESTS = ["thunder/tests/test_ops.py -k mish", "thunder/tests/test_grad.py -k mish"]
