"""pow's derivative rule as eager's: d/dx x**y is 0 where the exponent y is 0 (thunder: 0 * 0**-1 = NaN at x = 0)."""

WHY = (
    "thunder's _pow_grad computes g * y * x ** (y - 1) everywhere: at a zero exponent and a zero base that is "
    "0 * inf = NaN. Eager's pow_backward special-cases a zero exponent (its derivative is 0), for a number "
    "exponent and elementwise for a tensor one; so does the fix. The gradient stays a product with g (a constant "
    "zero would make thunder drop the output's requires_grad: zero-gradient-output-loses-requires-grad)."
)
EDITS = [
    Edit(
        "thunder.core.transforms",
        old="""    dx = g_res * y * x ** (y - 1)
""",
        new="""    if isinstance(y, TensorProxy) or y == 0:  # eager's pow_backward: the derivative is 0 where the exponent is
        dx = g_res * tlang.where(y == 0, 0, y * x ** (y - 1))
    else:
        dx = g_res * y * x ** (y - 1)
""",
    )
]
THUNDER_TESTS = ["thunder/tests/test_grad.py -k pow"]
