"""The checkpoint converter converts the body of a checkpoint nested in a checkpointed function too."""

WHY = (
    "thunderfx's _checkpoint_function_converter (thunder/dynamo/utils.py) replaces the torch operators of a "
    "checkpointed function's graph by thunder's, node by node; a checkpoint inside that function is a "
    "tag_activation_checkpoint node whose body is another graph module, which it maps to thunder's checkpoint but "
    "never converts, so thunder runs the inner body's torch operators on TensorProxy (TypeError), after minutes of "
    "interpretation. The fix converts a nested checkpoint's body before its node, at any depth."
)
EDITS = [
    Edit(
        "thunder.dynamo.utils",
        old="""            if n.target.__module__ in ("_operator", "builtins"):
                continue
            check(
                n.target in _torch_to_thunder_function_map, lambda: f"Unexpected {n.target}, not registered in Thunder"
            )
""",
        new="""            if n.target.__module__ in ("_operator", "builtins"):
                continue
            if n.target is torch.ops.higher_order.tag_activation_checkpoint:
                # a checkpoint nested in the checkpointed function: its body is a graph module of its own
                _checkpoint_function_converter(getattr(gm, n.args[0].target))
            check(
                n.target in _torch_to_thunder_function_map, lambda: f"Unexpected {n.target}, not registered in Thunder"
            )
""",
    )
]
# thunder's tests of the converter (test_dynamo's test_checkpoint_converter*) require CUDA; none has a nested
# checkpoint. On CPU: its checkpoint tests through thunder.jit, and the splitter's, which the converter serves.
THUNDER_TESTS = ["thunder/tests/test_grad.py -k checkpoint", "thunder/tests/test_dynamo.py -k 'splitter or checkpoint'"]
