"""trunc has a zero derivative, as eager's (zeros_like): thunder's vjp gets that rule, so a trunc of a value that
needs no grad is a constant of the vjp, and one that needs grad passes a zero gradient back."""

WHY = (
    "thunder/core/transforms.py has no augmented forward or backward rule for prims.trunc, and is_constant_for_vjp "
    "asks a bound symbol's tags (no_grad, integer dtypes), not whether its inputs need grad: a trunc of a value made "
    "under no_grad (or detached) inside a traced region is still asked for its vjp, and the vjp raises 'Failed to "
    "find a gradient transform for bound symbol ... prims.trunc'. Where trunc's input needs grad thunderfx's "
    "splitter sends trunc to inductor (its meta check), so the gap shows only on a value needing no grad. The fix "
    "gives trunc eager's rule: a zero gradient of the input's shape, written as SIGN's rule is (g * 0: it reads the "
    "cotangent). round and lerp have no rule either (noted in the entry, not fixed here: one bug, one fix)."
)
EDITS = [
    Edit(
        "thunder.core.transforms",
        old="""        backward_impls[op] = func
        return func

    return decorator
""",
        new="""        backward_impls[op] = func
        return func

    return decorator


# trunc: a zero derivative, as eager's (zeros_like).
augmented_forward_impls[prims.PrimIDs.TRUNC] = lambda x: (prims.trunc(x), ())
backward_impls[prims.PrimIDs.TRUNC] = lambda g: g * 0
""",
    ),
]
THUNDER_TESTS = [
    "thunder/tests/test_grad.py -k 'trunc or sign or fmod'",
    "thunder/tests/test_ops.py -k trunc",
]
