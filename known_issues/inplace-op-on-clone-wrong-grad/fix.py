"""The forward/backward split saves, for a tensor the forward later overwrites in place, a clone taken before the
overwrite: the backward reads the value the op it differentiates read, as eager's autograd does."""

WHY = (
    "thunder functionalizes an in-place op on a tensor as the op's result plus copy_(result, tensor), and "
    "split_into_forward_and_backward (thunder/transforms/autodiff.py) saves the tensor itself where the op's backward "
    "needs its input (abs_, sin_, log_, sqrt_, ...). The copy_ runs in the forward and overwrites that saved "
    "tensor's storage, so the backward differentiates at the mutated value: y.clone().abs_() gets the gradient of "
    "|abs(y)|, a weight gradient's sign flips. Eager's autograd keeps the input (or raises that it was modified); "
    "inside a checkpoint thunder recomputes it, so there it is right. The fix clones each saved tensor that the "
    "forward overwrites (a copy_'s destination, or an in-place op's as update_aliases recognizes them), just before "
    "the first overwrite, and the backward reads the clone. (An executor's in-place op called with inplace=True, as "
    "torch's silu, carries no such mark at the split: inplace-silu-wrong-grad is not covered.)"
)
EDITS = [
    Edit(
        "thunder.transforms.autodiff",
        old="""def split_into_forward_and_backward(joint_trace: TraceCtx):
""",
        new="""def _overwritten(bsym):
    \"\"\"The tensor a bound symbol of the forward overwrites in place, or None: a copy_'s destination, or what an
    in-place op (as update_aliases finds them: tagged IN_PLACE, or ending in a copy_) updates.\"\"\"
    if bsym.sym == prims.copy_ or bsym.sym.name == "copy_":
        return bsym.args[1]
    if bsym.subsymbols and bsym.subsymbols[-1].sym.id == prims.PrimIDs.COPY_:
        return bsym.subsymbols[-1].args[1]
    if bsym.sym.tags and prims.OpTags.IN_PLACE in bsym.sym.tags and bsym.flat_proxy_args:
        return bsym.flat_proxy_args[0]
    return None


def _saved_before_overwrite(saved, forward_bsyms, backward_bsyms, trace):
    \"\"\"forward_bsyms and backward_bsyms where each tensor of saved (by name; updated) that the forward overwrites in
    place is cloned just before the first such overwrite, the backward reading the clone.\"\"\"
    from thunder.executors.torchex import clone  # the split runs on the trace executors already claimed

    swap, forward = {}, []
    for bsym in forward_bsyms:
        destination = _overwritten(bsym)
        if isinstance(destination, TensorProxy) and destination.name in saved and variableify(destination) not in swap:
            with tracectx(trace):
                kept = TensorProxy(like=destination)
            forward.append(clone.bind(destination, output=kept))
            swap[variableify(destination)] = kept
            del saved[destination.name]
            saved[kept.name] = kept
        forward.append(bsym)
    if not swap:
        return forward_bsyms, backward_bsyms
    return forward, [bsym.from_bsym_swap_proxies(swap) for bsym in backward_bsyms]


def split_into_forward_and_backward(joint_trace: TraceCtx):
""",
    ),
    Edit(
        "thunder.transforms.autodiff",
        old="""    for bsym in backward_part_bsyms:
        saved_for_backward.update((a.name, a) for a in bsym.flat_proxy_args if a.name in forward_proxy_names)
""",
        new="""    for bsym in backward_part_bsyms:
        saved_for_backward.update((a.name, a) for a in bsym.flat_proxy_args if a.name in forward_proxy_names)
    # a saved tensor that the forward overwrites in place (copy_, an in-place op) is saved from before the overwrite
    forward_part_bsyms, backward_part_bsyms = _saved_before_overwrite(
        saved_for_backward, forward_part_bsyms, backward_part_bsyms, joint_trace
    )
""",
    ),
]
THUNDER_TESTS = [
    "thunder/tests/test_inplace_copy.py",
    "thunder/tests/test_update_aliases.py",
    "thunder/tests/test_grad.py -k 'abs or sin or log or sqrt or exp'",
]
