"""copysign's sign source gets eager's zero gradient: the output depends on it, and requires grad with it."""

WHY = (
    "thunder decomposes copysign(a, b) as where(signbit(b), -abs(a), abs(a)) (thunder/clang), and signbit's boolean "
    "result carries no gradient, so under thunder the output does not depend on b for autograd: where only b needs "
    "grad, split_into_forward_and_backward finds no backward, the output does not require grad and backward raises "
    "'element 0 of tensors does not require grad'; where a needs grad too, b gets no gradient (None) where eager's "
    "is zeros (its derivative formula for other is zeros_like). The fix gives copysign eager's rule "
    "(FunctionsManual's copysign_tensor_self_backward): a's gradient g times the result's sign ratio, 0 where a is "
    "0, reduced to a's shape where a was broadcast; b's zeros of its shape (made from the cotangent, which thunder's "
    "backward must read)."
)
EDITS = [
    Edit(
        "thunder.core.transforms",
        old="""register_grad(pids.WHERE, _where_prim_grad)
""",
        new="""register_grad(pids.WHERE, _where_prim_grad)


# copysign as eager differentiates it: the magnitude's gradient is g times the sign ratio (0 where a is 0), the sign
# source's zeros, so the output depends on b (signbit in its decomposition carries no gradient).
def _copysign_grad(a: Number | TensorProxy, b: Number | TensorProxy, /) -> TensorProxy:
    fwd = ltorch.copysign(a, b)

    g = get_grad(fwd)
    if isinstance(a, TensorProxy) and dtypes.is_inexact_dtype(a.dtype):
        ratio = ltorch.where(a == 0, 0, fwd / a)
        put_grad(a, sum_to(g * ratio, a.shape).to(a.dtype))
    if isinstance(b, TensorProxy) and dtypes.is_inexact_dtype(b.dtype):
        # (zeros made from g: a backward must read its cotangent, torch_autograd's backward asserts it cleared it)
        put_grad(b, sum_to(ltorch.zeros_like(g), b.shape).to(b.dtype))

    return fwd


register_grad(ltorch.copysign, _copysign_grad)
""",
    ),
]
THUNDER_TESTS = [
    "thunder/tests/test_grad.py -k 'copysign or where'",
    "thunder/tests/test_ops.py -k copysign",
]
