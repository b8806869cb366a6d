"""The splitter gives a thunder region one differentiability flag per distinct tensor it returns, as thunder does."""

WHY = (
    "_splitter (thunder/dynamo/splitter.py) gives a thunder region one is_differentiable_outputs flag per output "
    "node. A checkpoint whose body returns one tensor under two names (c[:, 1:3] = x[:, 1:3]; return c, c) leaves "
    "the region as two output nodes holding one tensor (one fake example_value), while thunder's computation returns "
    "each proxy once (its outputs are the epilogue's distinct inputs). So there are more flags than outputs, and "
    "ThunderFunction.forward asserts len(flat_output) == len(is_differentiable_outputs): an AssertionError without a "
    "message. The fix gives one flag per distinct example_value."
)
EDITS = [
    Edit(
        "thunder.dynamo.splitter",
        old="""            is_differentiable_outputs = []
            for n in graph_module.graph.nodes:
                if n.op == "output":
                    for n in n.all_input_nodes:
                        if "example_value" not in n.meta or getattr(n.meta["example_value"], "grad_fn", None) is None:
""",
        new="""            is_differentiable_outputs = []
            for n in graph_module.graph.nodes:
                if n.op == "output":
                    # One flag per distinct tensor: thunder's computation returns a tensor once, however many output
                    # nodes hold it (a checkpoint's two results that are one tensor under two names).
                    returned = set()
                    for n in n.all_input_nodes:
                        if (value := n.meta.get("example_value")) is not None:
                            if id(value) in returned:
                                continue
                            returned.add(id(value))
                        if "example_value" not in n.meta or getattr(n.meta["example_value"], "grad_fn", None) is None:
""",
    ),
]
THUNDER_TESTS = [
    "thunder/tests/test_dynamo.py -k 'splitter or split or checkpoint or inplace'",
]
