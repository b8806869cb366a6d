"""A derivative rule for torch.lerp, so thunder's checkpoint can differentiate lerp and the splitter keeps it."""

WHY = (
    "thunder has no derivative rule for lerp (neither torch.lerp nor prims.lerp). A checkpointed region is differentiated by thunder's vjp, symbol by symbol, which raises "
    "'VJP for PrimIDs.LERP is not implemented' when thunderfx's splitter tries the region: it sends the region to "
    "inductor, whose CPU kernel for three 0-dim tensors does not compile. The fix registers lerp's rule, eager's "
    "lerp_backward: the cotangent times (1 - weight) for start, times weight for end, times (end - start) for "
    "weight, each summed to its operand's shape; the torch executor runs lerp itself, as before."
)
EDITS = [
    Edit(
        "thunder.core.transforms",
        old="""register_grad(pids.WHERE, _where_prim_grad)
""",
        new="""register_grad(pids.WHERE, _where_prim_grad)


def _lerp_grad(start: TensorProxy, end: TensorProxy, weight: Number | TensorProxy) -> TensorProxy:
    fwd = ltorch.lerp(start, end, weight)

    g = get_grad(fwd)
    grads = (g * (1 - weight), g * weight, g * (end - start))  # each summed over what lerp broadcast it to
    put_grads((start, end, weight), tuple(sum_to(grad, getattr(x, "shape", ())) for grad, x in zip(grads, (start, end, weight))))

    return fwd


register_grad("torch.lerp", _lerp_grad)
""",
    )
]
THUNDER_TESTS = ["thunder/tests/test_grad.py -k lerp", "thunder/tests/test_ops.py -k lerp"]
