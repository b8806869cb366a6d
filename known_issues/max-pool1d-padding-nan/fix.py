"""max pooling's decomposition pads with the dtype's lowest finite value, not -inf: its projection multiplies every
padded element by zeros of the kernel basis, and -inf * 0 is NaN."""

WHY = (
    "thunder's _max_pool_helper (thunder/torch/__init__.py), the decomposition max_pool1d's gradient goes through "
    "(max_pool2d and max_pool3d have torch composites for forward and backward), pads the input with -inf, then "
    "projects each window on the identity basis with a grouped convolution: every output whose window holds padding "
    "sums -inf * 0 = NaN, forward and backward. The lowest finite value of the dtype is below every element a window "
    "can hold (padding is at most half the kernel: each window holds a real element), so the maximum is the same and "
    "the products are finite."
)
EDITS = [
    Edit(
        "thunder.torch",
        old="""    # Apply padding {
    a = apply_padding_for_pool_ops(dim, a, padding, kernel_size, -float("inf"))
    # }
""",
        new="""    # Apply padding {
    # The lowest finite value, not -inf: the projection below multiplies padded elements by zeros (-inf * 0 is NaN).
    a = apply_padding_for_pool_ops(dim, a, padding, kernel_size, torch.finfo(to_torch_dtype(a.dtype)).min)
    # }
""",
    )
]
THUNDER_TESTS = ["thunder/tests/test_ops.py -k max_pool1d", "thunder/tests/test_grad.py -k max_pool"]
