"""sigmoid's own derivative rule, eager's: g * s * (1 - s) from its output s (thunder differentiated 1 / (1 + exp(-x)))."""

WHY = (
    "thunder has no derivative rule for torch.sigmoid: it differentiates its decomposition reciprocal(1 + exp(-x)), "
    "whose backward is -g / (1 + exp(-x))**2 * exp(-x): at x below about -88 (float32) exp(-x) is inf and that is "
    "0 * inf = NaN. Eager's sigmoid_backward is g * s * (1 - s) from the output; the fix registers that rule, "
    "computed in float32 for float16 and bfloat16 as eager's (one rounding)."
)
EDITS = [
    Edit(
        "thunder.core.transforms",
        old="""register_grad("torch.nn.functional.logsigmoid", _log_sigmoid_grad)
""",
        new="""register_grad("torch.nn.functional.logsigmoid", _log_sigmoid_grad)


def _sigmoid_grad(a: TensorProxy) -> TensorProxy:
    from thunder.torch import sigmoid, to

    fwd = sigmoid(a)
    g = get_grad(fwd)
    wide = dtypes.float32 if fwd.dtype in (dtypes.float16, dtypes.bfloat16) else fwd.dtype
    s = to(fwd, wide)
    put_grad(a, to(to(g, wide) * s * (1 - s), fwd.dtype))
    return fwd


register_grad("torch.sigmoid", _sigmoid_grad)
""",
    )
]
THUNDER_TESTS = ["thunder/tests/test_grad.py -k sigmoid", "thunder/tests/test_ops.py -k sigmoid"]
