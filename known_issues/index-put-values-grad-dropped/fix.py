"""A backward that returns gradients for the differentiable arguments only is matched to those arguments."""

WHY = (
    "grad_transform_on_trace (thunder/transforms/autodiff.py) runs an op that has an augmented forward and a "
    "backward registered separately (thunder/core/transforms.py) through an ad hoc joint forward-backward, which "
    "zips the backward's results with the op's arguments by position. Such a backward returns gradients for the "
    "differentiable arguments only, as backward_pass reads it (a result per argument that _is_differentiable): "
    "index_put's returns (grad of a, grad of values) for (a, indices, values, accumulate), so the values' gradient "
    "lands on indices, a tuple, and is dropped: the values get none (eager: the gradient at the indexed rows). "
    "Inside a checkpoint thunder differentiates the region with backward_pass, which is right. The fix matches the "
    "results to the differentiable arguments where the backward returned fewer than there are arguments, as "
    "backward_pass does."
)
EDITS = [
    Edit(
        "thunder.transforms.autodiff",
        old="""                        assert len(grad_inps) <= len(flat_inps)
                        for i, gi in zip(flat_inps, grad_inps):
""",
        new="""                        assert len(grad_inps) <= len(flat_inps)
                        if len(grad_inps) < len(flat_inps):
                            # As backward_pass reads a backward: one result per differentiable argument (index_put's
                            # for a and values, none for indices).
                            differentiable = iter(grad_inps)
                            grad_inps = [
                                next(differentiable, None) if _is_differentiable(i) else None for i in flat_inps
                            ]
                        for i, gi in zip(flat_inps, grad_inps):
""",
    ),
    Edit(
        "thunder.transforms.autodiff",
        old="""    augmented_forward_impls,
    backward_impls,
""",
        new="""    augmented_forward_impls,
    backward_impls,
    _is_differentiable,
""",
    ),
]
THUNDER_TESTS = [
    "thunder/tests/test_grad.py -k 'index_put or index_add or index_copy or scatter or take or embedding'",
    "thunder/tests/test_ops.py -k index_put",
    "thunder/tests/test_inplace_copy.py",
    "thunder/tests/test_core.py -k 'backward or grad'",
]
