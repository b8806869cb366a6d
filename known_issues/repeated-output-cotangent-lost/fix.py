"""A tensor the forward returns at several positions gets the cotangent torch delivers: at its last position."""

WHY = (
    "split_into_forward_and_backward (thunder/transforms/autodiff.py) gives an output proxy's get_grad the cotangent "
    "of its first position in the forward's flat outputs. After an in-place update is functionalized, a name from "
    "before the update and the update's result are one proxy (c = x.clone(); u = c.add_(1); return c, u gives "
    "flat_output (t19, t19)), so the forward returns one tensor at two positions. torch.autograd.Function routes the "
    "whole gradient of a tensor it returns at several positions to the last of them (each position resets the "
    "tensor's gradient edge; the others get zeros), so the backward reads zeros and the update's input gets no "
    "gradient. The fix reads the cotangent at the last position, where autograd puts it."
)
EDITS = [
    Edit(
        "thunder.transforms.autodiff",
        old="""            grad_outs[output_pos[bsym.args[0].name].pop(0)] = bsym.output
""",
        new="""            # torch.autograd.Function delivers the gradient of a tensor returned at several positions (an updated
            # tensor under two names) at the last of them.
            grad_outs[output_pos[bsym.args[0].name].pop()] = bsym.output
""",
    ),
]
THUNDER_TESTS = [
    "thunder/tests/test_inplace_copy.py",
    "thunder/tests/test_update_aliases.py",
    "thunder/tests/test_core.py -k 'backward or grad'",
]
