"""max_pool3d's grad transform takes stride=None as the kernel size, as max_pool2d's does (and as the documentation says)."""

WHY = (
    "thunder's torch executor replaces max_pool3d by max_pool3d_with_indices in max_pool3d_bwd_wrapper and passes "
    "stride=None through to aten, which rejects it; max_pool2d_bwd_wrapper first sets stride = kernel_size (the "
    "documented default). The fix gives max_pool3d's wrapper the same two lines."
)
EDITS = [
    Edit(
        "thunder.executors.torchex",
        old="""    ceil_mode: bool = False,
) -> tuple[TensorProxy, TensorProxy] | TensorProxy:
    primals = max_pool3d_with_indices(a, kernel_size, stride, padding, dilation, ceil_mode)
""",
        new="""    ceil_mode: bool = False,
) -> tuple[TensorProxy, TensorProxy] | TensorProxy:
    if stride is None:
        stride = kernel_size
    primals = max_pool3d_with_indices(a, kernel_size, stride, padding, dilation, ceil_mode)
""",
    )
]
THUNDER_TESTS = ["thunder/tests/test_ops.py -k max_pool"]
