"""The splitter gives a thunder region one differentiability flag per distinct tensor it returns, as thunder does."""

WHY = (
    "_splitter (thunder/dynamo/splitter.py) gives a thunder region one is_differentiable_outputs flag per output "
    "node. A checkpoint whose body returns one tensor under two names (c[:, 1:3] = x[:, 1:3]; return c, c) leaves "
    "the region as two output nodes holding one tensor (one fake example_value), while thunder's computation returns "
    "each proxy once (its outputs are the epilogue's distinct inputs; an in-place update's result and its input are two proxies there, though dynamo gives them one example_value). So there are more flags than outputs, and "
    "ThunderFunction.forward asserts len(flat_output) == len(is_differentiable_outputs): an AssertionError without a "
    "message. The fix gives one flag per value thunder returns: a checkpoint's results that its body returns as one node are one."
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
                    # One flag per value thunder returns: two results of one checkpoint that its body returns as one
                    # node (return c, c) are one proxy in thunder's trace, so one output of its computation.
                    returned = set()
                    for n in n.all_input_nodes:
                        value = n
                        if n.target is operator.getitem and n.args[0].target is torch.ops.higher_order.tag_activation_checkpoint:
                            body = getattr(graph_module, n.args[0].args[0].target).graph.output_node().args[0]
                            value = (n.args[0], body[n.args[1]])
                        if value in returned:
                            continue
                        returned.add(value)
                        if "example_value" not in n.meta or getattr(n.meta["example_value"], "grad_fn", None) is None:
""",
    ),
]
THUNDER_TESTS = [
    "thunder/tests/test_dynamo.py -k 'splitter or split or checkpoint or inplace'",
]
