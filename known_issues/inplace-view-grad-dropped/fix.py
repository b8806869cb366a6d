"""update_aliases' derivative: each alias's new value is its old one with the region the alias written last holds
taken from that alias (thunder passed each alias's cotangent straight through, as if the update were not there)."""

WHY = (
    "thunder represents an in-place update through a view (mul_ is mul then copy_ into the view) as the update plus "
    "update_aliases of the view's group before the next read of any alias of it (thunder/core/update_aliases.py). "
    "update_aliases is the identity at run time (the aliases share memory), and its derivative passed each alias's "
    "cotangent straight to the same alias: in the autodiff graph the base's later value never depends on the update, "
    "so an update whose derivative is not 1 is lost from the gradient (y = x * 2; y[0].mul_(3): x's gradient 2 where "
    "eager gives 6; add_ is right by accident). The pass also did not update a group before the outputs, when the "
    "base is returned without another read. The fix: the pass updates each view group on its own, the alias written "
    "since the group's last update first, and before the outputs too; the derivative of update_aliases takes the "
    "first alias as the group's values: every other alias's cotangent is split, at run time through the aliases' own "
    "strides (any view: select, slice, transpose, view, diagonal ...), into the part over the first alias's elements, "
    "which goes to the first alias, and the rest, which goes to the alias itself (an expanded alias's repeated "
    "elements summed). A group that no in-place op wrote since its last update agrees with itself: the split moves no "
    "value, only the path its cotangent takes, and none at all where the first alias is an expanded view."
)
EDITS = [
    Edit(
        "thunder.core.prims",
        old="""update_aliases = make_prim(
    PrimIDs.UPDATE_ALIASES,
    "update_aliases",
    meta=_update_aliases_meta,
)
""",
        new="""update_aliases = make_prim(
    PrimIDs.UPDATE_ALIASES,
    "update_aliases",
    meta=_update_aliases_meta,
)


def _alias_cotangent_split_meta(
    g: TensorProxy, alias: TensorProxy, written: TensorProxy, /
) -> tuple[TensorProxy, TensorProxy]:
    return TensorProxy(like=written, dtype=g.dtype, requires_grad=False), TensorProxy(like=g, requires_grad=False)


# The cotangent g of alias's updated value, split into the part over written's elements (as written's cotangent) and
# the rest (alias's): which elements these are is known at run time only, from the two aliases' strides.
alias_cotangent_split = make_prim("alias_cotangent_split", "alias_cotangent_split", meta=_alias_cotangent_split_meta)
""",
    ),
    Edit(
        "thunder.executors.torchex",
        old="""update_aliases = ex.register_operator("update_aliases", meta=prims.update_aliases, fn=lambda x: x)
_register_implementation(prims.update_aliases, update_aliases, checker=_always_executable)
""",
        new="""update_aliases = ex.register_operator("update_aliases", meta=prims.update_aliases, fn=lambda x: x)
_register_implementation(prims.update_aliases, update_aliases, checker=_always_executable)


def _alias_cotangent_split(
    g: torch.Tensor, alias: torch.Tensor, written: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    if alias.untyped_storage().data_ptr() != written.untyped_storage().data_ptr():
        return g.new_zeros(written.shape), g
    # each element's position in the aliases' memory; alias may repeat positions (an expanded view)
    positions = torch.arange(alias.untyped_storage().nbytes() // alias.element_size(), device=g.device)
    alias_at = positions.as_strided(alias.shape, alias.stride(), alias.storage_offset())
    written_at = positions.as_strided(written.shape, written.stride(), written.storage_offset())
    if written_at.unique().numel() < written.numel():
        # an expanded first alias holds no single value per position; no in-place op wrote it (eager refuses), so the
        # group agrees with itself and each alias keeps its own cotangent
        return g.new_zeros(written.shape), g
    is_written = torch.zeros_like(positions, dtype=torch.bool).index_fill_(0, written_at.reshape(-1), True)[alias_at]
    by_position = g.new_zeros(positions.shape).index_put_((alias_at[is_written],), g[is_written], accumulate=True)
    return by_position[written_at], g.masked_fill(is_written, 0)


alias_cotangent_split = ex.register_operator(
    "alias_cotangent_split", meta=prims.alias_cotangent_split, fn=_alias_cotangent_split
)
_register_implementation(prims.alias_cotangent_split, alias_cotangent_split, checker=_always_executable)
""",
    ),
    Edit(
        "thunder.core.transforms",
        old="""def _update_aliases_prim_grad(tensors: tuple[TensorProxy, ...]) -> tuple[TensorProxy, ...]:
    fwd_tensors = prims.update_aliases(tensors)
    for fwd_t, t in zip(fwd_tensors, tensors):
        g = get_grad(fwd_t)
        put_grad(t, g)
    return fwd_tensors
""",
        new="""def _update_aliases_prim_grad(tensors: tuple[TensorProxy, ...]) -> tuple[TensorProxy, ...]:
    # the first alias holds the group's values (update_aliases puts the one an in-place op wrote last first): over its
    # elements, every other alias's new value is the first alias's
    fwd_tensors = prims.update_aliases(tensors)
    first, first_grad = tensors[0], get_grad(fwd_tensors[0])
    for fwd_t, t in zip(fwd_tensors[1:], tensors[1:]):
        part, rest = prims.alias_cotangent_split(get_grad(fwd_t), t, first)
        first_grad = first_grad + part
        put_grad(t, rest)
    put_grad(first, first_grad)
    return fwd_tensors
""",
    ),
    Edit(
        "thunder.core.update_aliases",
        old="""    # Third pass: insert alias updates
    for bsym in computation_trace.bound_symbols:
        if _is_inplace_op(bsym) or _is_view_creation_op(bsym) or _involves_viewed_args(bsym, viewed):
            in_tensors = list(map(variableify, filter(lambda p: isinstance(p, TensorProxy), bsym.flat_proxy_args)))
            if _is_inplace_op(bsym) and in_tensors:
                in_tensors = {in_tensors[0]}
            else:
                in_tensors = set(in_tensors)
            out_tensors = set(map(variableify, filter(lambda p: isinstance(p, TensorProxy), bsym.flat_proxy_outs)))
            encountered.update(in_tensors)
            group = set(reduce(set.union, filter(lambda g: any(g.intersection(in_tensors)), view_groups), set()))
            if not group or not (views_encountered := group.intersection(encountered)):
                # If group is empty, this is a view creation with operands that are not involved in any inplace ops.
                bsyms.append(bsym.from_bsym_swap_proxies(swap_map, skip_output=True))
                continue

            new_aliases = _get_new_aliases(views_encountered, computation_trace)

            update_bsym, swap_map = _get_update_bsym(views_encountered, swap_map, new_aliases)
            new_bsym = bsym.from_bsym_swap_proxies(swap_map)
            if has_tags(bsym, {BoundSymbolTag.BACKWARD}):
                update_bsym.tags.add(BoundSymbolTag.BACKWARD)
            bsyms.append(update_bsym)
            encountered.update(out_tensors)
            bsyms.append(new_bsym)
            if _is_inplace_op(bsym) and len(out_tensors) == 1 and len(in_tensors) == 1:
                #  This relies on these being one element sets (ltorch.setitem_ yields no outs).
                swap_map = _update_swap_map(swap_map, in_tensors.pop(), unvariableify(out_tensors.pop()))

        else:
            bsyms.append(bsym.from_bsym_swap_proxies(swap_map))

    alias_updated_trace = from_trace(computation_trace)
    alias_updated_trace.set_provenance(TraceProvenance("Update aliases for in-place ops"))
    alias_updated_trace.bound_symbols = bsyms
    return alias_updated_trace
""",
        new="""    # Third pass: insert alias updates. Each group is updated on its own, the alias an in-place op wrote since
    # the group's last update first: update_aliases' vjp takes the first alias's values as the group's truth.
    written = {}  # a view group's index -> its alias an in-place op wrote since the group's last update

    def update_groups(in_tensors, tags):
        nonlocal swap_map
        updates = []
        for index, group in enumerate(view_groups):
            if not group.intersection(in_tensors) or not (views_encountered := group.intersection(encountered)):
                continue
            first = written.pop(index, None)
            ordered = sorted(views_encountered, key=lambda v: (v != first, unvariableify(v).name))
            update_bsym, swap_map = _get_update_bsym(ordered, swap_map, _get_new_aliases(ordered, computation_trace))
            update_bsym.tags.update(tags)
            updates.append(update_bsym)
        return updates

    def update_written_groups():
        return update_groups(set().union(*(view_groups[index] for index in written)), set())

    for bsym in computation_trace.bound_symbols:
        if bsym.sym.id == prims.PrimIDs.RETURN and written:
            # the outputs are read last: a group an in-place op wrote is updated before them
            bsyms += update_written_groups()
            bsyms.append(bsym.from_bsym_swap_proxies(swap_map))
        elif _is_inplace_op(bsym) or _is_view_creation_op(bsym) or _involves_viewed_args(bsym, viewed):
            in_tensors = list(map(variableify, filter(lambda p: isinstance(p, TensorProxy), bsym.flat_proxy_args)))
            if _is_inplace_op(bsym) and in_tensors:
                in_tensors = {in_tensors[0]}
            else:
                in_tensors = set(in_tensors)
            out_tensors = set(map(variableify, filter(lambda p: isinstance(p, TensorProxy), bsym.flat_proxy_outs)))
            encountered.update(in_tensors)
            updates = update_groups(in_tensors, {BoundSymbolTag.BACKWARD} & set(bsym.tags or ()))
            if not updates:
                # No group, or none encountered: a view creation with operands that are not involved in any inplace ops.
                bsyms.append(bsym.from_bsym_swap_proxies(swap_map, skip_output=True))
                continue

            new_bsym = bsym.from_bsym_swap_proxies(swap_map)
            bsyms += updates
            encountered.update(out_tensors)
            bsyms.append(new_bsym)
            if _is_inplace_op(bsym) and in_tensors:  # a group of one tensor has no other alias to update
                index = next(index for index, group in enumerate(view_groups) if group.intersection(in_tensors))
                if len(view_groups[index]) > 1:
                    written[index] = next(iter(in_tensors))
            if _is_inplace_op(bsym) and len(out_tensors) == 1 and len(in_tensors) == 1:
                #  This relies on these being one element sets (ltorch.setitem_ yields no outs).
                swap_map = _update_swap_map(swap_map, in_tensors.pop(), unvariableify(out_tensors.pop()))

        else:
            bsyms.append(bsym.from_bsym_swap_proxies(swap_map))
    # the body of a checkpointed region has no return: its outputs are read after it
    bsyms += update_written_groups() if written else []

    alias_updated_trace = from_trace(computation_trace)
    alias_updated_trace.set_provenance(TraceProvenance("Update aliases for in-place ops"))
    alias_updated_trace.bound_symbols = bsyms
    return alias_updated_trace
""",
    ),
]
# sin_ through a view saves the view for its derivative and overwrites it: inplace-op-on-clone-wrong-grad's bug
# (a reproduction, y = x * 2; y[0].sin_(), holds both)
BUILDS_ON = ["inplace-op-on-clone-wrong-grad"]
THUNDER_TESTS = [
    "thunder/tests/test_update_aliases.py",
    "thunder/tests/test_inplace_copy.py",
    "thunder/tests/test_grad.py -k checkpoint",
    "thunder/tests/test_grad.py -k 'inplace or alias or view'",
    "thunder/tests/test_dynamo.py -k 'checkpoint or splitter'",
]
