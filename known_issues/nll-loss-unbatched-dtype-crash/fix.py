"""nll_loss's backward makes the unused total_weight in the input's dtype, as aten's nll_loss_forward returns it, not
in float64."""

WHY = (
    "For reduction 'sum' or 'none' thunder keeps no total_weight (the backward does not divide by it), and "
    "_nll_loss_backward_impl (thunder/executors/torchex.py) passes aten.nll_loss_backward a float64 zero in its place "
    "('aten.nll_loss_backward expects total_weight to be a float64 tensor'). aten checks it has the input's dtype "
    "wherever it reads it: an unbatched input, and any reduction but 'none', crash with 'expected scalar type Float "
    "but found Double'. The fix makes the placeholder in the input's dtype, as eager's forward returns total_weight."
)
EDITS = [
    Edit(
        "thunder.executors.torchex",
        old="""    if total_weight is None:
        # NOTE aten.nll_loss_backward expects total_weight to be a float64 tensor
        total_weight = torch.tensor(0.0, dtype=torch.float64, device=a.device)
""",
        new="""    if total_weight is None:
        # NOTE aten.nll_loss_backward expects total_weight in the input's dtype (nll_loss_forward returns it so)
        total_weight = torch.tensor(0.0, dtype=a.dtype, device=a.device)
""",
    )
]
THUNDER_TESTS = ["thunder/tests/test_ops.py -k nll_loss", "thunder/tests/test_grad.py -k nll_loss"]
