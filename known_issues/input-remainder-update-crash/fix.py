"""remainder gets eager's derivative (derivatives.yaml: self's gradient the cotangent, other's minus the cotangent
times the floored quotient), written as fmod's rule is: a remainder in a traced region is no longer asked for a rule
it does not have, whether or not its inputs need grad."""

WHY = (
    "thunder/core/transforms.py has no augmented forward or backward rule for prims.remainder (fmod, its twin, has "
    "one), and is_constant_for_vjp asks a bound symbol's tags, not whether its inputs need grad: an in-place "
    "remainder_ of a network input that needs no grad, whose result a value needing grad reads, is still asked for "
    "its vjp, and the vjp raises 'Failed to find a gradient transform for bound symbol ... prims.remainder'. The fix "
    "gives remainder eager's rule beside fmod's, with the quotient floored where fmod's is truncated."
)
EDITS = [
    Edit(
        "thunder.core.transforms",
        old="""    prims.PrimIDs.BITCAST: lambda x_dtype, g: (prims.bitcast(g, x_dtype), None),
}
""",
        new="""    prims.PrimIDs.BITCAST: lambda x_dtype, g: (prims.bitcast(g, x_dtype), None),
}


# remainder: eager's derivative (derivatives.yaml), fmod's rule with the quotient floored.
augmented_forward_impls[prims.PrimIDs.REMAINDER] = lambda x, y: (prims.remainder(x, y), (x, y))
backward_impls[prims.PrimIDs.REMAINDER] = lambda x, y, g: (g, -g * prims.floor(x / y))
""",
    ),
]
THUNDER_TESTS = [
    "thunder/tests/test_grad.py -k 'remainder or fmod'",
    "thunder/tests/test_ops.py -k remainder",
]
