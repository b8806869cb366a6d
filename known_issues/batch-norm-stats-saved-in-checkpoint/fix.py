"""An in-place copy_ of the forward stays in the forward even where no forward value reads its destination (the
running statistics batch_norm updates in a tensor nothing reads after): it is not moved into the backward, where
it made the forward save the statistics it reads."""

WHY = (
    "split_into_forward_and_backward (thunder/transforms/autodiff.py) walks the joint trace backwards and keeps a "
    "symbol in the forward when the forward needs one of its outputs; a copy_ is kept there 'regardless of the "
    "output' only when its destination is a forward proxy. batch_norm (and instance_norm) in training update "
    "their running statistics by copy_; where those are tensors the network made (a running_mean computed in the "
    "checkpointed function, not a buffer) nothing in the forward reads the destination, so the update and the "
    "arithmetic feeding it (the batch's var and mean, scaled) are moved into the backward: the running statistics "
    "are updated at backward time, and the forward saves var_mean's outputs for it, intermediates of a "
    "checkpointed region that its recomputation would otherwise give (the memory failure). The fix keeps every "
    "forward copy_ (one without the BACKWARD tag) in the forward, as eager runs it."
)
EDITS = [
    Edit(
        "thunder.transforms.autodiff",
        old="""        if (bsym.sym == prims.copy_ or bsym.sym.name == "copy_") and bsym.args[1].name in forward_proxy_names:
""",
        new="""        if (bsym.sym == prims.copy_ or bsym.sym.name == "copy_") and (
            bsym.args[1].name in forward_proxy_names or BoundSymbolTag.BACKWARD not in bsym.tags
        ):
""",
    )
]
THUNDER_TESTS = [
    "thunder/tests/test_inplace_copy.py",
    "thunder/tests/test_update_aliases.py",
    "thunder/tests/test_ops.py -k 'batch_norm or instance_norm'",
]
