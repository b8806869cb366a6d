"""A backward keeps the unpacking of its inputs when it uses none of them, so it clears them, as
ThunderFunction.backward asserts: no gradient reaches an input through an empty tensor."""

WHY = (
    "split_into_forward_and_backward (thunder/transforms/autodiff.py) runs DCE over the backward trace: where no "
    "gradient reaches any input (an op whose output is empty: Tensor.expand to a 0 size, topk with k=0, "
    "repeat_interleave by 0, a pad that crops a dim to 0), the backward uses neither its saved tensors nor its "
    "cotangents, and DCE removes their unpacking too. del_last_used clears each input collection after its last "
    "use, so these are never cleared, and ThunderFunction.backward (thunder/executors/torch_autograd.py) fails its "
    "'assert not args' (the check that the compiled backward released the cotangents). The fix puts back the "
    "unpacking DCE removed: the backward clears its inputs and returns its None gradients."
)
EDITS = [
    Edit(
        "thunder.transforms.autodiff",
        old="""    backward_trace = dce(backward_trace)
""",
        new="""    unpacking = [
        bsym
        for bsym in backward_trace.bound_symbols
        if bsym.sym.id in (prims.PrimIDs.UNPACK_TRIVIAL, prims.PrimIDs.UNPACK_SEQUENCE)
    ]
    backward_trace = dce(backward_trace)
    # The unpacking of the inputs stays (del_last_used clears each collection after it): a backward that uses no
    # saved tensor or cotangent must still clear them, as ThunderFunction.backward asserts.
    kept = set(map(id, backward_trace.bound_symbols))
    backward_trace.bound_symbols = [b for b in unpacking if id(b) not in kept] + list(backward_trace.bound_symbols)
""",
    ),
]
THUNDER_TESTS = [
    "thunder/tests/test_grad.py -k 'expand or pad or topk or repeat'",
    "thunder/tests/test_core.py -k 'backward or grad'",
]
