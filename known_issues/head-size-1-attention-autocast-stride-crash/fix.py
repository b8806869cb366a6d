"""Backport of Lightning-AI/lightning-thunder#2689: the splitter compiles an inductor submodule at its first call, on
the real tensors, not ahead on fake arguments made from dynamo's example values."""

WHY = (
    "thunder's _splitter (thunder/dynamo/splitter.py) compiles each submodule it leaves to inductor at split time, "
    "with fake arguments from dynamo's example values (make_fake_arguments). Those carry the strides eager would give; "
    "when a thunder-compiled submodule feeds it (under autocast, a head size of 1 makes a transpose contiguous), the "
    "real input has other strides and inductor's guard fails ('expected size 2==2, stride 1==2 at dim=1'). Upstream "
    "delays inductor's compile to the first call, with the real tensors (PR 2689, first good version "
    "0.2.7.dev20251109 by bisect); the fix is that change: LazyInductorModule in utils.py, used by the splitter."
)
BACKPORT = "Lightning-AI/lightning-thunder#2689 (9ada615: thunder/dynamo/splitter.py, thunder/dynamo/utils.py)"
EDITS = [
    Edit(
        "thunder.dynamo.utils",
        old="""@dataclasses.dataclass()
class ProfileStats:
""",
        new="""class LazyInductorModule(torch.nn.Module):
    def __init__(self, graph_module, fake_mode):
        super().__init__()
        self.graph_module = graph_module
        self.compiled_fn = None
        self.fake_mode = fake_mode

        # For ease of debugging, we add graph attribute so GraphModule.print_readable will print it
        self.graph = graph_module.graph

    def forward(self, *args):
        import warnings

        from torch._guards import TracingContext, tracing
        from torch._subclasses.fake_tensor import DynamicOutputShapeException

        if self.compiled_fn is None:
            # Inductor needs fake_mode, particularly its shape_env, to handle SymInts
            with tracing(TracingContext(fake_mode=self.fake_mode)):
                try:
                    self.compiled_fn = torch._inductor.compile(self.graph_module, args)
                except DynamicOutputShapeException as e:
                    # This exception is meant to be handled by Dynamo, which is responsible for graph break
                    warnings.warn(f"Dynamic output shape operator encountered: {e}. Falling back to eager.")
                    self.compiled_fn = self.graph_module

        return self.compiled_fn(*args)


@dataclasses.dataclass()
class ProfileStats:
""",
    ),
    Edit(
        "thunder.dynamo.splitter",
        old="""            fake_args = make_fake_arguments(graph_module)
            if fake_args is None:
                jit_fn = fallback_eager("Example values for arguments are not available.")
            else:
                try:
                    # torch._inductor.compile returns a function, but update_node_and_submodule expects a Module
                    jit_fn = ModuleWrapper(torch_inductor(graph_module, fake_args))
                except DynamicOutputShapeException as e:
                    # This exception is meant to be handled by Dynamo, which is responsible for graph break
                    jit_fn = fallback_eager(f"Dynamic output shape operator encountered: {e}.")

            # This is for ease of debugging. We add graph attribute so GraphModule.print_readable will print it
            jit_fn.graph = graph_module.graph
""",
        new="""            from thunder.dynamo.utils import LazyInductorModule

            fake_mode = torch._guards.detect_fake_mode()
            # Delay Inductor compilation until invocation with real tensors,
            # because we do not know the strides of tensors that Thunder-compiled submodules return.
            jit_fn = LazyInductorModule(graph_module, fake_mode)
""",
    ),
]
# Not the two tests PR 2689 rewrote: test_thunderfx_node_with_no_example_value and ..._no_example_value_and_autocast
# assert the "Example values for arguments are not available" warning of the ahead-of-time compile it removes (upstream
# they became test_thunderfx_tolist and test_thunderfx_tolist_autocast, which expect no warning).
THUNDER_TESTS = [
    "thunder/tests/test_dynamo.py -k '(splitter or inductor or autocast or tolist or checkpoint) and not no_example_value'"
]
