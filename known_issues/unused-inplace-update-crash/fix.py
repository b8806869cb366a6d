"""thunderfx's dataflow fusion schedules the return last, after the in-place updates no output reads, so it stays
the trace's last symbol, as split_into_forward_and_backward asserts."""

WHY = (
    "thunderfx compiles with fusion_type='dataflow' (thunder/dynamo/compiler.py). Its scheduler, horizontal_merge "
    "(thunder/executors/data_dependent_partition.py), orders the trace's nodes topologically from its roots, and "
    "nothing orders the return after a node no output depends on: the copy_ of an in-place update whose result "
    "nobody reads (y = linear(x); y.mul_(0.5) left unused; a view of a clone updated; batch_norm's running "
    "statistics in training, left unused) is scheduled after the return. split_into_forward_and_backward "
    "(thunder/transforms/autodiff.py) then finds a copy_ as the joint trace's last symbol and fails its bare "
    "'assert return_bsym.sym == prims.python_return'. The fix defers the return while other nodes are ready: it "
    "has no children, so it goes last, and the updates keep their side effects."
)
EDITS = [
    Edit(
        "thunder.executors.data_dependent_partition",
        old="""        # takes the first node in the stack.
        cur = visit_stack.pop(0)
""",
        new="""        # takes the first node in the stack, but the return: it goes last, after the nodes no output depends on (an
        # in-place update nobody reads), as it has no children and the trace must end with it.
        if visit_stack[0] is graph.return_node and len(visit_stack) > 1:
            visit_stack.append(visit_stack.pop(0))
        cur = visit_stack.pop(0)
""",
    )
]
THUNDER_TESTS = [
    "thunder/tests/test_dynamo.py -k 'inplace or checkpoint or splitter'",
    "thunder/tests/test_inplace_copy.py",
]
