"""A random op that a checkpoint recomputes in backward replays the CPU generator's state of its forward draw."""

WHY = (
    "grad_transform_on_trace (thunder/transforms/autodiff.py) recomputes a checkpointed region in backward by copying "
    "its forward ops there, the random ones too: dropout's uniform draws a fresh mask in backward, so the gradient "
    "is that of another sample than the forward's. On CUDA thunder replaces uniform by uniform_philox with a seed "
    "and offset it saves; on CPU nothing keeps the draw. The fix does what eager's checkpoint does "
    "(preserve_rng_state): a CPU uniform to be recomputed keeps the generator's state before its draw in the forward "
    "(one uint8 tensor, saved for backward), and its recomputation draws from that state in a forked generator, so "
    "the global generator is left as eager leaves it. The values are not saved: the region is still recomputed."
)
EDITS = [
    Edit(
        "thunder.executors.torchex",
        old="""uniform = ex.register_operator("uniform", meta=_uniform_meta, fn=_uniform)
""",
        new="""uniform = ex.register_operator("uniform", meta=_uniform_meta, fn=_uniform)


# A CPU uniform that a checkpoint recomputes in backward: the forward keeps the generator's state before its draw,
# and the recomputation replays it in a forked generator (eager's checkpoint preserves the CPU state the same way).
def _uniform_keeping_cpu_rng_state(shape, minval, maxval, *, device, dtype):
    state = torch.get_rng_state()
    return _uniform(shape, minval, maxval, device=device, dtype=dtype), state


def _uniform_keeping_cpu_rng_state_meta(shape, minval, maxval, *, device, dtype):
    state = TensorProxy(
        shape=tuple(torch.get_rng_state().shape), device=devices.cpu, dtype=dtypes.uint8, requires_grad=False
    )
    return _uniform_meta(shape, minval, maxval, device=device, dtype=dtype), state


def _uniform_replaying_cpu_rng_state(state, shape, minval, maxval, *, device, dtype):
    with torch.random.fork_rng(devices=()):
        torch.set_rng_state(state)
        return _uniform(shape, minval, maxval, device=device, dtype=dtype)


def _uniform_replaying_cpu_rng_state_meta(state, shape, minval, maxval, *, device, dtype):
    return _uniform_meta(shape, minval, maxval, device=device, dtype=dtype)


uniform_keeping_cpu_rng_state = ex.register_operator(
    "uniform_keeping_cpu_rng_state",
    meta=_uniform_keeping_cpu_rng_state_meta,
    fn=_uniform_keeping_cpu_rng_state,
    tags=(prims.OpTags.RANDOM_OP,),
)
uniform_replaying_cpu_rng_state = ex.register_operator(
    "uniform_replaying_cpu_rng_state",
    meta=_uniform_replaying_cpu_rng_state_meta,
    fn=_uniform_replaying_cpu_rng_state,
)
""",
    ),
    Edit(
        "thunder.transforms.autodiff",
        old="""            if _should_recompute_bsym_in_backward(bsym) and BoundSymbolTag.BACKWARD not in bsym.tags:
                nbsym = bsym.from_bsym()
                nbsym.tags.add(BoundSymbolTag.BACKWARD)
""",
        new="""            if _should_recompute_bsym_in_backward(bsym) and BoundSymbolTag.BACKWARD not in bsym.tags:
                if bsym.sym.id == prims.PrimIDs.UNIFORM and bsym.kwargs["device"].devicetype is DeviceType.CPU:
                    # Recomputed, a random op must draw what the forward drew: replay the CPU generator's state.
                    bsym, nbsym = self.uniform_replaying_its_draw(bsym)
                else:
                    nbsym = bsym.from_bsym()
                nbsym.tags.add(BoundSymbolTag.BACKWARD)
""",
    ),
    Edit(
        "thunder.transforms.autodiff",
        old="""        def process_bsym(self, bsym: BoundSymbol) -> None:
            processed_bsyms = []
""",
        new="""        def uniform_replaying_its_draw(self, bsym: BoundSymbol) -> tuple[BoundSymbol, BoundSymbol]:
            \"\"\"A CPU uniform's forward, which also returns the generator's state before its draw, and its
            recomputation from that state.\"\"\"
            from thunder.core.devices import to_torch_device
            from thunder.core.dtypes import to_torch_dtype
            from thunder.executors.torchex import uniform_keeping_cpu_rng_state, uniform_replaying_cpu_rng_state

            kwargs = {
                "device": to_torch_device(bsym.kwargs["device"]),
                "dtype": to_torch_dtype(bsym.kwargs["dtype"]),
            }
            with tracectx(self.new_trace):
                _, state = uniform_keeping_cpu_rng_state.meta(*bsym.args, **kwargs)
            located = {"header": bsym.header, "source_filename": bsym.source_filename}
            located["source_positions"] = bsym.source_positions
            forward = uniform_keeping_cpu_rng_state.bind(*bsym.args, **kwargs, output=(bsym.output, state))
            recomputation = uniform_replaying_cpu_rng_state.bind(state, *bsym.args, **kwargs, output=bsym.output)
            for new in (forward, recomputation):
                for name, value in located.items():
                    setattr(new, name, value)
            return forward, recomputation

        def process_bsym(self, bsym: BoundSymbol) -> None:
            processed_bsyms = []
            result = bsym.output
""",
    ),
    Edit(
        "thunder.transforms.autodiff",
        old="""            self.add_processed_bsyms(processed_bsyms)
            self.set_result(processed_bsyms[-1].output)
""",
        new="""            self.add_processed_bsyms(processed_bsyms)
            self.set_result(result)
""",
    ),
    Edit(
        "thunder.transforms.autodiff",
        old="""from thunder.core.proxies import TensorProxy, ProxyTag, Proxy, CollectionProxy, variableify
""",
        new="""from thunder.core.devices import DeviceType
from thunder.core.proxies import TensorProxy, ProxyTag, Proxy, CollectionProxy, variableify
""",
    ),
]
# thunder's own CPU tests of random ops are few (test_randomness.py is CUDA-only; its OpInfos have no dropout): these
# cover the grad transform and its recomputation, and a recorded dropout call.
THUNDER_TESTS = [
    "thunder/tests/test_grad.py -k checkpoint",
    "thunder/tests/test_dynamo.py -k 'checkpoint or splitter'",
    "thunder/tests/test_core.py -k 'backward or grad or torch_call_recording'",
    "thunder/tests/test_update_aliases.py",
    "thunder/tests/test_transforms.py",
]
