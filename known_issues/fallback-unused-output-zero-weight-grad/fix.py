"""An output of a thunder region that no loss reaches gets no cotangent, and a gradient that reads only such
cotangents is None, as eager leaves it: thunder's autograd.Function no longer materializes them as zeros."""

WHY = (
    "ThunderFunction (thunder/executors/torch_autograd.py) leaves torch.autograd.Function's materialize_grads on, so "
    "an output of a region that nothing downstream differentiates (the clone a fallback's sigmoid_ updates and "
    "nothing reads; a value only a dead branch reads) comes back with a zero cotangent, and the compiled backward "
    "turns it into a zero gradient for every input and parameter it reaches: a weight that reaches no output gets "
    "a zero gradient where eager leaves it None. The fix turns materialization off, gives the compiled backward "
    "zeros in place of the missing cotangents (what it read before), and returns None for each gradient whose "
    "every cotangent read was missing: which cotangents each gradient reads is read off the backward trace once, "
    "when jit builds the backward (cotangents_read_by_grads). A gradient that reads no cotangent at all (a constant "
    "zero) and a backward built elsewhere (no such record) keep today's behaviour."
)
EDITS = [
    Edit(
        "thunder.executors.torch_autograd",
        old="""import thunder.core.utils as utils
from .utils import is_cudagraph_capturing
""",
        new="""import thunder.core.utils as utils
from .utils import is_cudagraph_capturing


def cotangents_read_by_grads(backward_trace) -> tuple[frozenset[int], ...] | None:
    \"\"\"For each gradient a backward trace returns, the positions of the cotangents (its second argument, in the
    forward's flat output order) it reads through any chain of symbols; None when it returns no flat tuple.\"\"\"
    from thunder.core.prims import PrimIDs
    from thunder.core.proxies import Proxy

    reads = {c.name: frozenset((i,)) for i, c in enumerate(backward_trace.args[1]) if isinstance(c, Proxy)}
    returned = None
    for bsym in backward_trace.bound_symbols:
        if bsym.sym.id == PrimIDs.RETURN:
            returned = bsym.args[0]
        elif read := frozenset().union(*(reads.get(arg.name, ()) for arg in bsym.flat_proxy_args)):
            reads.update({out.name: read | reads.get(out.name, frozenset()) for out in bsym.flat_proxy_outs})
    if not isinstance(returned, tuple):
        return None
    return tuple(reads.get(grad.name, frozenset()) if isinstance(grad, Proxy) else frozenset() for grad in returned)
""",
    ),
    Edit(
        "thunder.executors.torch_autograd",
        old="""        # Here we just propagate the tensors through the autograd graph
        ctx.return_none_instead_of_grads = return_none_instead_of_grads
""",
        new="""        # Here we just propagate the tensors through the autograd graph
        ctx.return_none_instead_of_grads = return_none_instead_of_grads
        # An output no loss reaches gets None, not zeros: backward tells those cotangents apart.
        ctx.set_materialize_grads(False)
        ctx.output_meta = tuple(
            (o.shape, o.dtype, o.device) if isinstance(o, torch.Tensor) else None for o in flat_output
        )
""",
    ),
    Edit(
        "thunder.executors.torch_autograd",
        old="""            ctx.maybe_clear_saved_tensors()  # Delete the reference to all saved tensors in the context
        grads = ctx.compiled_backward([saved_tensors_list, ctx.saved_other], args)
""",
        new="""            ctx.maybe_clear_saved_tensors()  # Delete the reference to all saved tensors in the context
        # The compiled backward reads zeros for a missing cotangent; a gradient it computes from missing ones alone
        # is None below, as eager's is for an input that reaches no output the loss depends on.
        missing = frozenset(i for i, arg in enumerate(args) if arg is None and ctx.output_meta[i] is not None)
        for i in missing:
            shape, dtype, device = ctx.output_meta[i]
            args[i] = torch.zeros(shape, dtype=dtype, device=device)
        reads = getattr(ctx.compiled_backward, "cotangents_read", None)
        grads = ctx.compiled_backward([saved_tensors_list, ctx.saved_other], args)
        if missing and reads is not None and len(reads) == len(grads):
            grads = tuple(None if read and read <= missing else grad for grad, read in zip(grads, reads))
""",
    ),
    Edit(
        "thunder.executors.torch_autograd",
        old="""        ctx.side_channel = side_channel
        ctx.num_args = len(args)
""",
        new="""        ctx.side_channel = side_channel
        ctx.num_args = len(args)
        ctx.set_materialize_grads(False)  # ThunderFunction.backward fills the missing cotangents it needs
""",
    ),
    Edit(
        "thunder",
        old="""                backward_fn = backward_trc.python_callable()
""",
        new="""                backward_fn = backward_trc.python_callable()
                backward_fn.cotangents_read = thunder.executors.torch_autograd.cotangents_read_by_grads(backward_trc)
""",
    ),
]
THUNDER_TESTS = [
    "thunder/tests/test_core.py -k 'backward or grad or autograd'",
    "thunder/tests/test_dynamo.py -k 'checkpoint or grad or splitter'",
    "thunder/tests/test_grad.py -k 'phantom or vjp_correctness_sin or vjp_correctness_sigmoid'",
]
