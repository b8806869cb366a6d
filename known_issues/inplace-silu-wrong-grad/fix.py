"""silu's derivative rule records its in-place form as an out-of-place silu and a copy_ into the input."""

WHY = (
    "thunder's derivative rule for torch.nn.functional.silu (thunder/core/transforms.py) forwards inplace to "
    "ltorch.silu, which the torch executor runs as one op, F.silu(a, inplace=True): it overwrites the input that the "
    "rule's backward reads (sigmoid(a), a * (1 - sigmoid(a))), so the gradient is taken at silu(a), not a (about "
    "10 % off, up to 8x on small values). Nothing marks that op as in-place at the forward/backward split. The fix "
    "computes silu out of place and records the update as a copy_ into the input, the form every other in-place op "
    "has; the split then saves the input from before the copy_, with inplace-op-on-clone-wrong-grad's fix (the fix "
    "this one builds on)."
)
BUILDS_ON = ["inplace-op-on-clone-wrong-grad"]
EDITS = [
    Edit(
        "thunder.core.transforms",
        old="""    fwd = silu(a, inplace)
    g = get_grad(fwd)
    sigmoid = 1 / (1 + clang.exp(-a))
""",
        new="""    fwd = silu(a)
    if inplace:  # an update of a as a copy_, which the split sees (F.silu(a, inplace=True) overwrote a unseen)
        fwd = prims.copy_(fwd, a, grad_enabled=True)
    g = get_grad(fwd)
    sigmoid = 1 / (1 + clang.exp(-a))
""",
    )
]
THUNDER_TESTS = ["thunder/tests/test_grad.py -k silu", "thunder/tests/test_ops.py -k silu", "thunder/tests/test_inplace_copy.py"]
