"""A 0-dim operand's gradient summed to its shape in every prim's grad rule, as vjp already does for arguments."""

WHY = (
    "thunder's elementwise binary prims take a 0-dim tensor beside a larger one without broadcasting it, and their "
    "grad rules (add, sub, mul, div, ...) put the full-size cotangent on both operands. thunder's vjp sums the "
    "gradient of a 0-dim CPU argument to its shape, but only for the function's arguments: a 0-dim intermediate "
    "(a reshape of a slice, a 0-dim weight after a view) passes the full-size gradient on, and the next rule fails "
    "(reshape to [1] of 16 elements). The fix sums it where the grad transform collects every rule's put_grad "
    "(thunder/transforms/autodiff.py), whatever the rule (put_grads, put_grad, or a registered backward)."
)
EDITS = [
    Edit(
        "thunder.transforms.autodiff",
        old="""                                new_grad = nbsym.args[1]
""",
        new="""                                new_grad = nbsym.args[1]
                                if isinstance(p, TensorProxy) and p.ndim == 0 and getattr(new_grad, "ndim", 0):
                                    # A 0-dim operand a prim broadcast: its gradient is the sum (as vjp's for inputs).
                                    new_grad = self.add_bsyms_from_function(
                                        ltorch.sum, new_grad, tags={BoundSymbolTag.BACKWARD}
                                    )
""",
    )
]
THUNDER_TESTS = ["thunder/tests/test_grad.py -k 'add or sub or mul or div or atan2'", "thunder/tests/test_ops.py -k 'prelu or add'"]
