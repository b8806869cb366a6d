"""torch's reference of std and var takes a negative correction, as eager's ATen kernel does."""

WHY = (
    "Not thunder's: dynamo runs each call on fake tensors through torch's Python reference, and torch.std's "
    "(torch/_refs) asks set_correction (torch/_prims_common) for its correction, which raises 'correction argument "
    "should be non-negative'. Eager's ATen kernel takes any correction: the divisor is max(0, N - correction), a "
    "negative correction makes it larger than N. So dynamo crashes where eager runs (torch.compile with "
    "backend='eager' too), before thunder sees a graph. The fix lets set_correction return a negative correction; "
    "the references already divide by max(N - correction, 0), as ATen."
)
EDITS = [
    Edit(
        "torch._prims_common",
        old="""    if not isinstance(correction, (IntLike, FloatLike)):
        raise ValueError("correction argument should be integer or float")
    if correction < 0:
        raise ValueError("correction argument should be non-negative")
    return sym_float(correction)
""",
        new="""    if not isinstance(correction, (IntLike, FloatLike)):
        raise ValueError("correction argument should be integer or float")
    # A negative correction is valid, as in ATen's std and var: the divisor max(0, N - correction) exceeds N.
    return sym_float(correction)
""",
    )
]
# torch's own tests are not in its wheel: thunder's of std and var, whose OpInfo samples dynamo's path traces too.
THUNDER_TESTS = [
    "thunder/tests/test_ops.py -k '_std_ or _var_ or var_mean'",
    "thunder/tests/test_grad.py -k '_std_ or _var_ or var_mean'",
    "thunder/tests/test_reductions.py -k 'std or var'",
    "thunder/tests/test_dynamo.py -k splitter",
]
