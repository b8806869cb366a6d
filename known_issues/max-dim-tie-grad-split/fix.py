"""torch.max(x, dim)'s values taken at the index it returns, so the gradient goes there whole, as eager's does."""

WHY = (
    "thunder's torch_max returns amax(a, dim) beside argmax(a, dim): amax's derivative splits the gradient among "
    "tied maxima, while eager's max(dim) backward sends it whole to the index max returns. The fix takes the values "
    "at that index (take_along_dim of argmax), whose derivative scatters to it: the same values, eager's gradient."
)
EDITS = [
    Edit(
        "thunder.torch",
        old="""    utils.check_type(dim, NumberLike)
    max_vals = amax(a, dim, keepdim)
    argmax_vals = argmax(a, dim, keepdim)
    return max_vals, argmax_vals
""",
        new="""    utils.check_type(dim, NumberLike)
    argmax_vals = argmax(a, dim, keepdim)
    if a.ndim == 0:
        return amax(a, dim, keepdim), argmax_vals
    # The values at the index returned, as eager's backward: amax's derivative would split it among ties.
    index = argmax_vals if keepdim else unsqueeze(argmax_vals, dim)
    max_vals = take_along_dim(a, index, dim)
    return (max_vals if keepdim else squeeze(max_vals, dim)), argmax_vals
""",
    )
]
THUNDER_TESTS = ["thunder/tests/test_grad.py -k max", "thunder/tests/test_ops.py -k torch_max"]
