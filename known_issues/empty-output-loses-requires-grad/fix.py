"""repeat with a 0 among its sizes takes the general path (broadcast, reshape), not a zeros constant."""

WHY = (
    "thunder's repeat (thunder/torch/__init__.py) returns zeros(out_shape) when the output has a 0 size: a constant, "
    "so the output no longer depends on the input, does not require grad, and thunderfx's empty output has no "
    "grad_fn where eager's has one (the network's output then fails backward: 'element 0 of tensors does not require "
    "grad'). The general path (broadcast_in_dim, reshape) handles a 0 size, and its vjp sums the empty cotangent to "
    "zeros: eager's gradient. The fix drops the shortcut. Its backward then reads none of its inputs, which "
    "thunder's autograd function clears only with expand-to-zero-size-crash's fix (the fix this one builds on)."
)
BUILDS_ON = ["expand-to-zero-size-crash"]
EDITS = [
    Edit(
        "thunder.torch",
        old="""    out_shape = repeats[:new_dims] + tuple(repeats[i] * a.shape[i] for i in range(-a.ndim, 0))
    if 0 in out_shape:
        return zeros(*out_shape, device=a.device, dtype=a.dtype)

""",
        new="""    out_shape = repeats[:new_dims] + tuple(repeats[i] * a.shape[i] for i in range(-a.ndim, 0))

""",
    )
]
THUNDER_TESTS = ["thunder/tests/test_ops.py -k repeat", "thunder/tests/test_grad.py -k 'repeat or expand'"]
