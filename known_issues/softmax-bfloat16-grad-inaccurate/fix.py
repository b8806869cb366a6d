"""softmax's backward in float32 for float16 and bfloat16, rounded once, as eager's _softmax_backward_data."""

WHY = (
    "thunder's softmax_backward (thunder/core/transforms.py) computes primal * (g - (primal * g).sum(dim)) in the "
    "input's dtype: in bfloat16 each of its four ops rounds, and the sum of products cancels, so one element is 30% "
    "of the tensor's scale off where eager's is 2%. Eager's _softmax_backward_data accumulates in float32 and "
    "rounds once; the fix computes the same expression in float32 for float16 and bfloat16."
)
EDITS = [
    Edit(
        "thunder.core.transforms",
        old="""def softmax_backward(primal, dim, input_dtype, g):
    grad = primal * (g - (primal * g).sum(dim, keepdim=True))
""",
        new="""def softmax_backward(primal, dim, input_dtype, g):
    if primal.dtype in (dtypes.float16, dtypes.bfloat16):  # accumulate in float32 and round once, as eager does
        primal, g = primal.to(dtypes.float32), g.to(dtypes.float32)
    grad = primal * (g - (primal * g).sum(dim, keepdim=True))
""",
    )
]
THUNDER_TESTS = ["thunder/tests/test_grad.py -k softmax", "thunder/tests/test_ops.py -k softmax"]
