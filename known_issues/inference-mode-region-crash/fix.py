"""thunderfx's splitter keeps a torch.inference_mode() region whole: its enter, body and exit go to the fallback."""

WHY = (
    "dynamo writes `with torch.inference_mode():` as _enter_inference_mode(True) -> guard, the body, "
    "_exit_inference_mode(guard). thunder maps neither call, so its splitter (thunder/dynamo/splitter.py) puts them "
    "in fallback partitions and the supported body in a thunder partition between them: the guard becomes an output "
    "of one submodule and an input of another, which torch.fx cannot write ('NotImplementedError: argument of type: "
    "<class 'torch._C._InferenceMode'>'). get_nodes_in_unsupported_ctx_regions exists to keep such context regions "
    "whole in the fallback (its docstring: previously no_grad and autocast); the fix adds inference_mode's region to "
    "it, enter and exit included, so the fallback (inductor) runs the region as eager does."
)
EDITS = [
    Edit(
        "thunder.dynamo.utils",
        old="""    for node in gm.graph.nodes:
        if node.op == "call_function" and node.target in UNSUPPORTED_THUNDER_CTX:
            ctx_cnt += 1
""",
        new="""    inference_depth = 0  # a torch.inference_mode() region stays whole, its enter and exit included
    for node in gm.graph.nodes:
        if node.op == "call_function" and node.target is torch.autograd.grad_mode._enter_inference_mode:
            inference_depth += 1
        if inference_depth > 0:
            nodes_in_unsupported_ctx_regions.add(node)
        if node.op == "call_function" and node.target is torch.autograd.grad_mode._exit_inference_mode:
            inference_depth -= 1
        if node.op == "call_function" and node.target in UNSUPPORTED_THUNDER_CTX:
            ctx_cnt += 1
""",
    )
]
THUNDER_TESTS = ["thunder/tests/test_dynamo.py -k 'splitter or autocast or no_grad or grad_enabled'"]
