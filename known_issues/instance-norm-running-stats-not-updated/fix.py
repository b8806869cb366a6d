"""instance_norm updates the module's running statistics by the mean over the batch of each sample's statistics, as
aten's instance_norm does; batch_norm no longer updates repeated copies that nothing reads."""

WHY = (
    "thunder's instance_norm (thunder/torch/__init__.py) runs batch_norm on the input reshaped to (1, b * c, ...) with "
    "running_mean and running_var repeated b times: batch_norm updates those repeated copies in place, and nothing "
    "writes them back, so the module's running statistics never move (and where the repeat is a view of one memory "
    "location, the in-place update crashes). aten's instance_norm copies the batch mean of the updated copies into the "
    "originals. The fix computes that same value, (1 - momentum) * running + momentum * the batch mean of each "
    "sample's mean (unbiased variance), and writes it into the originals; in training batch_norm gets no running "
    "statistics (it normalizes by the input's own either way)."
)
EDITS = [
    Edit(
        "thunder.torch",
        old="""    org_shape = a.shape
    b = org_shape[0]
    c = org_shape[1]
    if running_mean is not None:
""",
        new="""    org_shape = a.shape
    b = org_shape[0]
    c = org_shape[1]
    org_running_mean, org_running_var = running_mean, running_var
    if use_input_stats:  # updated below from the samples' statistics, not through batch_norm's repeated copies
        running_mean = running_var = None
    if running_mean is not None:
""",
    ),
    Edit(
        "thunder.torch",
        old="""    out = batch_norm(a, running_mean, running_var, weight, bias, use_input_stats, momentum, eps)

    return out.reshape(org_shape)
""",
        new="""    out = batch_norm(a, running_mean, running_var, weight, bias, use_input_stats, momentum, eps)

    # aten's instance_norm: running_mean.copy_(running_mean_.view({b, c}).mean(0, false)), where running_mean_ is the
    # repeated statistics batch_norm updated: (1 - momentum) * running + momentum * the batch mean of the samples'
    if use_input_stats and (org_running_mean is not None or org_running_var is not None):
        unbiased_var, sample_mean = var_mean(a, (0, *range(2, a.ndim)), correction=1)
        for running, stat in ((org_running_mean, sample_mean), (org_running_var, unbiased_var)):
            if running is not None:
                new = (1 - momentum) * running + momentum * mean(stat.reshape(b, c), 0)
                _copy_(running, to(new, running.dtype))

    return out.reshape(org_shape)
""",
    ),
]
THUNDER_TESTS = ["thunder/tests/test_ops.py -k 'instance_norm or batch_norm'", "thunder/tests/test_grad.py -k 'instance_norm or batch_norm'"]
