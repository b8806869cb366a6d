"""mish's own derivative rule, eager's: g * (tanh(sp) + x * sigmoid(x) * (1 - tanh(sp)**2)), sp = softplus(x)
(thunder differentiated its decomposition x * tanh(log1p(exp(x))))."""

WHY = (
    "thunder has no derivative rule for torch.nn.functional.mish: it differentiates its decomposition "
    "a * tanh(log1p(exp(a))) (thunder/torch/__init__.py, no softplus threshold), whose backward multiplies by exp(a) "
    "after dividing by 1 + exp(a): above about 88 (float32; 11 in float16) exp(a) is inf and that is 0 * inf = NaN. "
    "Eager's mish_backward is g * (tanh(sp) + x * sigmoid(x) * (1 - tanh(sp)**2)), finite for every finite x; the fix "
    "registers that rule, computed in float32 for float16 and bfloat16 as eager's (one rounding)."
)
EDITS = [
    Edit(
        "thunder.core.transforms",
        old="""register_grad("torch.nn.functional.softplus", _softplus_grad)
""",
        new="""register_grad("torch.nn.functional.softplus", _softplus_grad)


def _mish_grad(a: TensorProxy, /, inplace: bool = False) -> TensorProxy:
    from thunder.torch import exp, log1p, mish, tanh, to

    fwd = mish(a, inplace=inplace)
    g = get_grad(fwd)
    x = to(a, utils.get_computation_dtype(a.dtype))
    tanh_softplus = tanh(log1p(exp(x)))
    sigmoid_x = 1 / (1 + exp(-x))
    put_grad(a, to(to(g, x.dtype) * (tanh_softplus + x * sigmoid_x * (1 - tanh_softplus * tanh_softplus)), a.dtype))
    return fwd


register_grad("torch.nn.functional.mish", _mish_grad)
""",
    )
]
THUNDER_TESTS = ["thunder/tests/test_ops.py -k mish", "thunder/tests/test_grad.py -k mish"]
