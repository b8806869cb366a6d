"""update_aliases processes the body of each checkpointed region too: a read after an in-place update inside the
region reads the updated value, as everywhere else."""

WHY = (
    "thunder's insert_alias_updates (thunder/core/update_aliases.py) rewrites every read that follows an in-place op "
    "(mul_ is mul then copy_ into the tensor) to read the copy_'s result. It walks the top-level bound symbols only; "
    "a checkpointed region is one bound symbol (activation_checkpoint) whose body is its subsymbols, so inside it a "
    "later read keeps the tensor from before the update, the copy_'s result is unused, and flattening the region for "
    "the grad transform drops the update: c = x.clone(); c.mul_(0.5); a layer reading c gets x (output and gradients "
    "2x for mul_, 4x through a quadratic layer). Outside checkpoints the same code is right. The fix runs the same "
    "pass over each region's body before the top level, a nested region's body before its outer region's, and an "
    "outer region's output that a nested region updated is the updated value."
)
EDITS = [
    Edit(
        "thunder.core.update_aliases",
        old="""def insert_alias_updates(computation_trace: Trace, alias_tensor_indices: list[list[int]]) -> Trace:
    if not any(_is_inplace_op(bsym) for bsym in computation_trace.bound_symbols):
        return computation_trace
""",
        new="""def _holds_inplace_op(region: BoundSymbol) -> bool:
    \"\"\"Whether a checkpointed region's body, or the body of a region nested in it, holds an in-place op.\"\"\"
    return any(
        _is_inplace_op(s) or (s.sym.id == "activation_checkpoint" and _holds_inplace_op(s)) for s in region.subsymbols
    )


def _with_checkpoint_bodies_updated(computation_trace: Trace) -> tuple[Trace, dict]:
    \"\"\"computation_trace with insert_alias_updates applied to the body (subsymbols) of each checkpointed region
    that holds an in-place op (nested regions first); a region output an in-place op of the body updated is its
    updated value, for the region and for every later read of it. Also returns that swap of region outputs.\"\"\"
    bsyms, swap, changed = [], {}, False
    for bsym in computation_trace.bound_symbols:
        bsym = bsym.from_bsym_swap_proxies(swap) if swap else bsym
        if bsym.sym.id == "activation_checkpoint" and _holds_inplace_op(bsym):
            body = from_trace(computation_trace)
            body.bound_symbols = list(bsym.subsymbols)
            body, nested_swap = _with_checkpoint_bodies_updated(body)
            body_bsyms = _insert_alias_updates_of_top_level(body, []).bound_symbols
            # a tensor's name -> its value after the body: a nested region's updated output, or the result of the
            # last in-place op on it
            latest = {unvariableify(variable).name: value for variable, value in nested_swap.items()}
            for sub in body_bsyms:
                outs = [o for o in sub.flat_proxy_outs if isinstance(o, TensorProxy)]
                if sub.sym.name == "update_aliases":  # the same tensors, renamed from here on
                    latest.update((old.name, new) for old, new in zip(sub.flat_proxy_args, outs))
                elif _is_inplace_op(sub) and len(outs) == 1 and sub.flat_proxy_args:
                    latest[sub.flat_proxy_args[0].name] = outs[0]
            for output in (o for o in bsym.flat_proxy_outs if isinstance(o, TensorProxy)):
                final = output
                while final.name in latest:
                    final = latest[final.name]
                if final is not output:
                    swap[variableify(output)] = final
            bsym = bsym.from_bsym(subsymbols=body_bsyms).from_bsym_swap_proxies(swap, skip_inputs=True, skip_subsymbols=True)
            changed = True
        bsyms.append(bsym)
    if not changed:
        return computation_trace, swap
    updated = from_trace(computation_trace)
    updated.bound_symbols = bsyms
    return updated, swap


def insert_alias_updates(computation_trace: Trace, alias_tensor_indices: list[list[int]]) -> Trace:
    # an in-place op inside a checkpointed region is one of the region's subsymbols: its body is updated the same way
    computation_trace, _ = _with_checkpoint_bodies_updated(computation_trace)
    return _insert_alias_updates_of_top_level(computation_trace, alias_tensor_indices)


def _insert_alias_updates_of_top_level(computation_trace: Trace, alias_tensor_indices: list[list[int]]) -> Trace:
    if not any(_is_inplace_op(bsym) for bsym in computation_trace.bound_symbols):
        return computation_trace
""",
    )
]
THUNDER_TESTS = ["thunder/tests/test_update_aliases.py", "thunder/tests/test_inplace_copy.py", "thunder/tests/test_grad.py -k checkpoint"]
