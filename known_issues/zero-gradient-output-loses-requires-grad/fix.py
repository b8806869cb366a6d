"""floor and ceil have a zero derivative, as eager's (zeros_like): not constants to thunder's vjp, so their output
requires grad and their input's gradient is zeros."""

WHY = (
    "thunder/core/transforms.py lists FLOOR and CEIL among nondifferentiable_vjp_symbols (since PR 2609, the "
    "bisected first bad version 0.2.6.dev20251019). A constant for the vjp contributes no gradient: where a "
    "network's output reaches its input only through such an op, split_into_forward_and_backward finds no backward at all and returns none, thunder connects nothing to "
    "autograd, and the output does not require grad (eager's does: its derivative formulas for floor and ceil are "
    "zeros_like(grad)), so backward raises 'element 0 of tensors does not require grad'. The fix "
    "gives both eager's rule: a zero gradient of the input's shape, written as SIGN's rule is (g * 0: it "
    "reads the cotangent, so the backward still clears it; a non-finite cotangent gives NaN where eager gives 0). "
    "A float division with rounding_mode='floor', whose decomposition floors a quotient, then passes g * 0 back "
    "through it: where the divisor is 0 the gradients are NaN, where stock thunder's are inf and eager's 0 (unlike "
    "eager before the fix and after it; measured)."
)
EDITS = [
    Edit(
        "thunder.core.transforms",
        old="""    prims.PrimIDs.FULL,
    prims.PrimIDs.FLOOR,
    prims.PrimIDs.CEIL,
}
""",
        new="""    prims.PrimIDs.FULL,
}
""",
    ),
    Edit(
        "thunder.core.transforms",
        old="""    prims.PrimIDs.BITCAST: lambda x_dtype, g: (prims.bitcast(g, x_dtype), None),
}
""",
        new="""    prims.PrimIDs.BITCAST: lambda x_dtype, g: (prims.bitcast(g, x_dtype), None),
}

# floor and ceil: a zero derivative, as eager's (zeros_like), not a constant for the vjp.
for _rounding in (prims.floor, prims.ceil):
    augmented_forward_impls[_rounding.id] = lambda x, _op=_rounding: (_op(x), ())
    backward_impls[_rounding.id] = lambda g: g * 0
del _rounding
""",
    ),
]
THUNDER_TESTS = [
    "thunder/tests/test_grad.py -k 'floor or ceil or sign or interpolate or div'",
    "thunder/tests/test_ops.py -k 'floor or ceil'",
]
