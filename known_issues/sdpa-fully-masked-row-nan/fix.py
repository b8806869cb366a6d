"""scaled_dot_product_attention's decomposition gives a fully masked row zero weights, as eager's math backend's
_safe_softmax does, not softmax's NaN."""

WHY = (
    "thunder's scaled_dot_product_attention (thunder/torch/__init__.py) is softmax(logits) @ value, its boolean mask "
    "setting masked logits to -inf: a row masked whole is softmax of all -inf, NaN, and the NaN reaches the output "
    "and every gradient. Eager's math backend (torch >= 2.5) takes _safe_softmax there: the weights of a row whose "
    "logits are all -inf are 0, so that row of the output is 0. The fix does the same after the softmax (the masked "
    "positions' gradients are zeroed by the mask's where, as in eager)."
)
EDITS = [
    Edit(
        "thunder.torch",
        old="""    attn_weight = softmax(logits, dim=-1)
    attn_weight = dropout(attn_weight, dropout_p)
""",
        new="""    attn_weight = softmax(logits, dim=-1)
    # eager's _safe_softmax: a row whose logits are all -inf (masked whole) attends to nothing (0), not NaN
    attn_weight = where(amax(logits, -1, keepdim=True) == -math.inf, 0, attn_weight)
    attn_weight = dropout(attn_weight, dropout_p)
""",
    )
]
THUNDER_TESTS = ["thunder/tests/test_ops.py -k scaled_dot_product_attention", "thunder/tests/test_grad.py -k scaled_dot"]
