"""A symbol is constant for the vjp only when every tensor it returns was made under no_grad, not any one of them."""

WHY = (
    "Symbols called under torch.no_grad tag their outputs DETACHED_AUTOGRAD_GRAPH (thunder/core/symbol.py), and "
    "is_constant_for_vjp (thunder/core/transforms.py) treats a symbol as a constant of the vjp when any of its "
    "outputs has that tag. A checkpointed function is one symbol (activation_checkpoint) whose outputs are the "
    "function's: one of them made in a no_grad region inside the function makes the whole checkpoint constant, so "
    "none of its outputs requires grad (the network's output then fails backward: 'element 0 of tensors does not "
    "require grad'), where eager detaches only the value made under no_grad. The fix treats a symbol as constant "
    "when all of its tensor outputs are detached; a checkpoint with some is differentiated, and its backward "
    "recomputes the function, in which the no_grad region's symbols are constant again."
)
EDITS = [
    Edit(
        "thunder.core.transforms",
        old="""    # NOTE - `any(()) is False`
    output_disconnected_from_graph = any(
        ProxyTag.DETACHED_AUTOGRAD_GRAPH in o.tags for o in symbol.flat_outs if isinstance(o, TensorProxy)
    )
""",
        new="""    # Only when every tensor output is: a checkpoint returns values made in and out of a no_grad region.
    tensor_outputs = [o for o in symbol.flat_outs if isinstance(o, TensorProxy)]
    output_disconnected_from_graph = bool(tensor_outputs) and all(
        ProxyTag.DETACHED_AUTOGRAD_GRAPH in o.tags for o in tensor_outputs
    )
""",
    ),
]
THUNDER_TESTS = [
    "thunder/tests/test_grad.py -k 'no_grad or checkpoint'",
    "thunder/tests/test_core.py -k 'no_grad or grad_enabled or backward'",
    "thunder/tests/test_dynamo.py -k 'checkpoint or no_grad or splitter'",
]
