"""_normalize subtracts the mean from the input already in the computation dtype, so the input's gradient from the
centring and from the statistics is summed in float32 and rounded once, as eager's layer_norm backward does."""

WHY = (
    "thunder's _normalize (thunder/torch/__init__.py), which layer_norm decomposes into, converts the input to float32 "
    "for var_mean (a_acc) but centres the low-precision input itself: (a - mean) promotes a to float32 by a second "
    "conversion. Autodiff then rounds each path's gradient to bfloat16 (or float16) before summing them, and a "
    "layer_norm's input gradient is a difference of nearly equal terms: the sum cancels in low precision (4 bfloat16 "
    "ulps, and no longer summing to zero along the normalized dim), and in float16 the terms can overflow to inf - inf "
    "= NaN. Eager computes the whole input gradient in float32 and rounds it once. The fix centres a_acc: one "
    "conversion, whose gradient is the float32 sum of both paths, rounded once; the forward values are unchanged."
)
EDITS = [
    Edit(
        "thunder.torch",
        old="""    rstd = rsqrt(biased_var + eps)
    out = (a - mean) * rstd
    return out, mean, rstd
""",
        new="""    rstd = rsqrt(biased_var + eps)
    out = (a_acc - mean) * rstd
    return out, mean, rstd
""",
    )
]
THUNDER_TESTS = ["thunder/tests/test_ops.py -k 'layer_norm or group_norm'", "thunder/tests/test_grad.py -k 'layer_norm or group_norm'"]
