"""thunder's scaled_dot_product_attention decomposition computed in float32 for half types, rounded once at the end."""

WHY = (
    "thunder runs a bfloat16 or float16 attention's forward with torch's kernel but differentiates it through its "
    "own decomposition of scaled_dot_product_attention (thunder/torch/__init__.py), whose every step (the scaled "
    "query and key, their product, the softmax's result, its product with the value) is rounded to the half type. "
    "Eager's CPU and CUDA kernels accumulate in float32 and round once. Where a gradient is exactly zero in eager "
    "(a head whose values are equal at every position: the softmax's gradient cancels), thunder's rounded steps "
    "leave noise of the half type's resolution, and an optimizer that normalizes the gradient (AdamW moves a weight "
    "whose gradient is above its eps, 1e-8, by about lr) turns that noise into full-size updates. The fix "
    "computes the decomposition in the half type's computation dtype (float32), as thunder's softmax already "
    "does, and rounds its result once."
)
EDITS = [
    Edit(
        "thunder.torch",
        old="""    # Reference implementation:
    # https://github.com/pytorch/pytorch/blob/d62a80a/aten/src/ATen/native/transformers/attention.cpp#L639-L697
    if scale is None:
        scale = 1 / query.size(-1) ** 0.5
""",
        new="""    # Reference implementation:
    # https://github.com/pytorch/pytorch/blob/d62a80a/aten/src/ATen/native/transformers/attention.cpp#L639-L697
    if scale is None:
        scale = 1 / query.size(-1) ** 0.5
    # Half types are computed in float32 and rounded once, as torch's kernels accumulate: rounding each step leaves
    # noise where the exact gradient is zero.
    result_dtype = query.dtype
    computation_dtype = utils.get_computation_dtype(result_dtype)
    query, key, value = (t.to(computation_dtype) for t in (query, key, value))
""",
    ),
    Edit(
        "thunder.torch",
        old="""    return attn_weight @ value
""",
        new="""    return (attn_weight @ value).to(result_dtype)
""",
    ),
]
# (test_sdpaex_executor.py and test_grad.py's sdpa_manual vjp test are CUDA-only: 0 collected or a collection error on CPU.)
THUNDER_TESTS = [
    "thunder/tests/test_ops.py -k scaled_dot_product_attention",
    "thunder/tests/test_grad.py -k scaled_dot_product_attention",
    "thunder/tests/test_core.py -k scaled_dot_product_attention",
    "thunder/tests/test_dynamo.py -k 'checkpoint or splitter'",
]
