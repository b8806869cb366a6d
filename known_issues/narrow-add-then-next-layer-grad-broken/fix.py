"""Each argument's gradient is its own input proxy's, not that of the proxy the return holds in its place."""

WHY = (
    "The grad transform (grad_transform_on_trace, thunder/transforms/autodiff.py) returned, for each argument, the "
    "gradient of the proxy at its position in the return's flat_args. The alias pass puts other proxies there: an "
    "argument updated in place is its last alias (a proxy made inside the trace, whose gradient is none: the add_ "
    "through a narrow that thunderfx's splitter sent to inductor makes the next thunder graph update its argument "
    "in place, and that graph then has no backward at all, so its output does not require grad), and aliased "
    "arguments are the one proxy they were merged into (each gets the whole gradient, and autograd sums them: "
    "sigmoid-inplace-then-inplace-wrong-grad's doubled gradient). The fix takes each argument's gradient from the "
    "trace's own argument proxy: the sum of what flowed into it through the alias updates; an argument merged into "
    "another gets none (its uses were the other's)."
)
EDITS = [
    Edit(
        "thunder.transforms.autodiff",
        old="""                grad_flat_args = []
                for p in bsym.args[0]["flat_args"]:
                    # or p = self.read(p) here?
                    if isinstance(p, TensorProxy) and p.requires_grad and p.name in grad_proxy_map:
""",
        new="""                grad_flat_args = []
                # Each argument's gradient is its own proxy's: the return's flat_args hold an argument updated in
                # place as its last alias, and aliased arguments as the one proxy they were merged into.
                for p in tree_iter((self.trace.args, self.trace.kwargs)):
                    if isinstance(p, TensorProxy) and p.requires_grad and p.name in grad_proxy_map:
""",
    )
]
THUNDER_TESTS = [
    "thunder/tests/test_update_aliases.py",
    "thunder/tests/test_inplace_copy.py",
    "thunder/tests/test_grad.py -k 'sigmoid or mul or add'",
    "thunder/tests/test_dynamo.py -k 'inplace or checkpoint or splitter'",
    "thunder/tests/test_core.py -k 'backward or grad'",
]
