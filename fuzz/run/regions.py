"""What thunder did with each checkpointed region, read from its own traces after a forward and backward: which of the
region's ops it recomputes in backward, which of their results the forward saves for backward instead, and what else
the forward saves, by reason (docs/oracle.md, "Memory contract").

Shared by the harness and every repro.py: this module's source is copied verbatim into each repro (after
`fuzz.run.passes`'s). It imports nothing but the standard library and torch (thunder when called).

How a region is read in thunder 0.2.6 (thunder/transforms/autodiff.py, `grad_transform_on_trace`):
- The regions of a compiled submodule are the ``activation_checkpoint`` bound symbols of its first trace. Each carries
  the source line of its FX node in the submodule's generated code, and every op thunder derives from the region's
  body keeps that line through decompositions, the grad transform, the forward/backward split and fusions: a
  forward op belongs to the region of its line. (The recompute tag is what is under test, not a sign of membership.)
- Thunder keeps a region's outputs by design: the grad transform drops the recompute tag from a checkpoint's outputs
  (an untagged ``shallow_copy`` of each). Only the region's other results, its intermediates, saved for backward
  mean the region was not checkpointed.
- Recomputed: a backward op with the symbol and arguments of a forward op of the region (names differ between the
  traces, so arguments are mapped back through the saved tensors and the ops matched before).
"""

import linecache
import re
from dataclasses import dataclass, field

import torch

CHECKPOINT_OP = torch.ops.higher_order.tag_activation_checkpoint
# Why thunder's forward saves a tensor for backward (`RegionReport.saved`): only the first is a memory failure.
INTERMEDIATE = "region intermediates"
# Kept as a selective checkpoint's policy asks (the harness's policy: MUST_SAVE the matmuls, fuzz/model_builder.py).
POLICY_SAVED = "region intermediates the selective policy saves"
# Thunder's names of the ops behind aten's mm, addmm and bmm, which the policy saves.
MATMUL_OPS = frozenset({"linear", "matmul", "mm", "addmm", "bmm", "baddbmm"})
# Saved and recomputed too: a checkpointed batch_norm's running-stat update (an in-place copy) is replayed in backward
# from the forward's saved mean and variance, while the gradient uses their recomputation (thunder 0.2.6).
RECOMPUTED_TOO = "region intermediates recomputed too (an update's replay reads the saved copy)"
# A recomputed random op replays its forward draw from the generator's state, kept as eager's checkpoint keeps it
# (preserve_rng_state): a CPU generator's state is a uint8 tensor that a random op returns beside its values.
GENERATOR_STATE = "random-number generator states (a recomputed random op replays its draw)"
_GENERATOR_STATE_SHAPE = tuple(torch.get_rng_state().shape)
OUTPUT = "region outputs (kept by design)"
REGION_INPUT = "region inputs"
WIDER_COPY = "wider copies of activations outside regions"
OUTSIDE = "activations outside regions"
NETWORK_INPUT = "parameters and inputs"
_NOT_OPS = {"python_del", "clear_mutable_collection", "python_return", "unpack_trivial", "unpack_sequence"}


@dataclass
class Region:
    """One checkpointed region of a dynamo graph: ``compiler`` "thunder" (everything below read from its traces) or
    "inductor" (a fallback: nothing known); byte counts by tensor name."""

    node: str
    compiler: str
    ops: list[str] = field(default_factory=list)
    recomputed: list[str] = field(default_factory=list)
    saved_intermediates: dict[str, int] = field(default_factory=dict)
    saved_outputs: dict[str, int] = field(default_factory=dict)
    policy: str | None = None  # a selective checkpoint's context_fn (dynamo keeps it in the body's meta)


@dataclass
class RegionReport:
    """The regions of a thunderfx run; ``captured``: the checkpoints dynamo captured (top level), each of which is one
    of ``regions`` unless thunder's preparation lost it; ``saved``: bytes thunder's forwards save, by reason."""

    captured: int = 0
    regions: list[Region] = field(default_factory=list)
    saved: dict[str, int] = field(default_factory=dict)

    def not_recomputed(self) -> list[Region]:
        """The regions thunder compiled whose intermediates its forward saves for backward (an empty tensor, which
        thunder keeps for a slice of size 0, costs nothing)."""
        return [region for region in self.regions if any(region.saved_intermediates.values())]

    def policy_ignored(self) -> list[Region]:
        """The selective regions whose backward recomputes a matmul their policy asks to save (MUST_SAVE)."""
        return [r for r in self.regions if r.policy and MATMUL_OPS.intersection(r.recomputed)]

    def lost(self) -> int:
        """How many captured checkpoints are neither a thunder region nor a fallback's."""
        return max(0, self.captured - len(self.regions))


def read_regions(backend) -> RegionReport:
    """The `RegionReport` of a `thunder.dynamo.thunderfx` function's ``_backend`` after its forward and backward."""
    report = RegionReport()
    for info in backend.subgraph_infos:
        report.captured += len(info.original_graph_module.graph.find_nodes(op="call_function", target=CHECKPOINT_OP))
        for submodule, compiled in info.submodule_to_compiled_functions.items():
            if compiled.compiler.name == "THUNDER":
                _read_thunder(compiled.compiled_fn, report)
            else:
                nodes = submodule.graph.find_nodes(op="call_function", target=CHECKPOINT_OP)
                report.regions += [Region(node.name, "inductor") for node in nodes]
    return report


def _line(bsym):
    return None if bsym.source_positions is None else (bsym.source_filename, bsym.source_positions.lineno)


def _is_output_copy(bsym) -> bool:
    """Whether ``bsym`` is the grad transform's copy of a region output (a shallow_copy without a source line)."""
    return bsym.sym.name == "shallow_copy" and _line(bsym) is None


def _ops(bsyms):
    """Top-level bound symbols with fusions replaced by their members."""
    for bsym in bsyms:
        if getattr(bsym.sym, "is_fusion", False):
            yield from _ops(bsym.subsymbols)
        elif bsym.sym.name not in _NOT_OPS:
            yield bsym


def _itemsize(proxy) -> int:
    from thunder.core.dtypes import to_torch_dtype

    return to_torch_dtype(proxy.dtype).itemsize


def _is_generator_state(proxy, producer) -> bool:
    """A CPU generator's state (uint8, the shape of `torch.get_rng_state()`) that a random op returns beside its
    values (never its first result, which is the values)."""
    from thunder.core.dtypes import uint8
    from thunder.core.prims import OpTags

    beside = len(producer.flat_proxy_outs) > 1 and producer.flat_proxy_outs[0].name != proxy.name
    random = OpTags.RANDOM_OP in (producer.sym.tags or ())
    return random and beside and proxy.dtype == uint8 and tuple(proxy.shape) == _GENERATOR_STATE_SHAPE


def _nbytes(proxy) -> int:
    numel = 1
    for size in proxy.shape:
        numel *= int(size)
    return numel * _itemsize(proxy)


def _node_name(line) -> str:
    text = linecache.getline(line[0], line[1]) if line[0] else ""
    found = re.search(r"(\w+) = torch\.ops\.higher_order\.tag_activation_checkpoint", text)
    return found.group(1) if found else f"line {line[1]}"


def _checkpoint_regions(trace) -> dict:
    """The checkpointed regions thunder's first forward ``trace`` has, by the network's source line."""
    regions = {}
    for bsym in trace.bound_symbols:
        if bsym.sym.id == "activation_checkpoint":
            policy = getattr(bsym.args[0], "meta", {}).get("_checkpoint_context_fn")
            regions[_line(bsym)] = Region(_node_name(_line(bsym)), "thunder", policy=policy and repr(policy))
    return regions


def _data_flow(forward_ops, regions) -> tuple[dict, dict, dict]:
    """Each forward value's region (where a region made it), producer and consumers, by name; each region's ops
    appended to it on the way."""
    region_of, producer, consumers = {}, {}, {}
    for bsym in forward_ops:
        region = regions.get(_line(bsym))
        if region is not None:
            region.ops.append(bsym.sym.name)
        for out in bsym.flat_proxy_outs:
            producer[out.name] = bsym
            if region is not None:
                region_of[out.name] = region
        for arg in bsym.flat_proxy_args:
            consumers.setdefault(arg.name, []).append(bsym)
    return region_of, producer, consumers


def _widest_per_line(trace) -> dict:
    """The widest element each line of the network produces before thunder's transforms (its first ``trace``): a saved
    tensor wider than that is thunder's copy (float32 of a bfloat16 activation)."""
    itemsizes = {}
    for bsym in trace.bound_symbols:
        sizes = [_itemsize(out) for out in bsym.flat_proxy_outs if hasattr(out, "dtype")]
        if sizes and _line(bsym) is not None:
            itemsizes[_line(bsym)] = max(sizes)
    return itemsizes


def _read_thunder(module, report: RegionReport) -> None:
    import thunder

    forward_traces, backward_traces = thunder.last_traces(module), thunder.last_backward_traces(module)
    regions = _checkpoint_regions(forward_traces[0])
    report.regions += regions.values()
    if not backward_traces:  # nothing needed a gradient: nothing saved
        return
    forward, backward = forward_traces[-1], backward_traces[-1]
    forward_ops = list(_ops(forward.bound_symbols))
    region_of, producer, consumers = _data_flow(forward_ops, regions)
    returned = forward.bound_symbols[-1]
    saved = [p for p in returned.args[1][0] if isinstance(p, thunder.core.proxies.TensorProxy)]
    outputs = {p.name for p in thunder.core.pytree.tree_iter(returned.args[0]) if hasattr(p, "name")}
    inputs = {out.name for b in forward.bound_symbols if b.sym.name == "unpack_trivial" for out in b.flat_proxy_outs}
    itemsizes = _widest_per_line(forward_traces[0])

    def origin(name):  # through the grad transform's copies of a region output to the output
        while name in producer and _is_output_copy(producer[name]):
            name = producer[name].flat_proxy_args[0].name
        return name

    # A region output no op reads after the region (the network drops it) has its copy only in backward, where the
    # region's later ops read the copy: saved all the same, by the same design.
    copied = {b.flat_proxy_args[0].name for b in _ops(backward.bound_symbols) if _is_output_copy(b)}

    def is_output(name, region):
        return (
            name in outputs
            or name in copied
            or any(regions.get(_line(c)) is not region for c in consumers.get(name, []))
        )

    recomputed = _mark_recomputed(forward_ops, backward, returned, regions)
    for proxy in saved:
        name, nbytes, source = proxy.name, _nbytes(proxy), origin(proxy.name)
        region = region_of.get(source)
        if name in inputs:
            reason = NETWORK_INPUT
        elif region is not None and is_output(source, region):
            reason, region.saved_outputs[name] = OUTPUT, nbytes
        elif region is not None and _is_generator_state(proxy, producer[source]):
            reason = GENERATOR_STATE
        elif region is not None and region.policy and producer[source].sym.name in MATMUL_OPS:
            reason = POLICY_SAVED
        elif region is not None:
            reason = RECOMPUTED_TOO if source in recomputed else INTERMEDIATE
            if reason == INTERMEDIATE:
                region.saved_intermediates[name] = nbytes
        elif any(regions.get(_line(c)) is not None for c in consumers.get(source, [])):
            reason = REGION_INPUT
        else:
            made_by = producer.get(source)
            widest = itemsizes.get(_line(made_by)) if made_by is not None else None
            reason = WIDER_COPY if widest is not None and _itemsize(proxy) > widest else OUTSIDE
        report.saved[reason] = report.saved.get(reason, 0) + nbytes


def _signature(bsym, rename):
    """A bound symbol's symbol and arguments, each proxy named by ``rename`` (None where one has no name there)."""
    from thunder.core.proxies import Proxy
    from thunder.core.pytree import tree_flatten

    flat, spec = tree_flatten((bsym.args, bsym.kwargs))
    named = [rename(a.name) if isinstance(a, Proxy) else repr(a) for a in flat]
    return None if None in named else (bsym.sym.id, str(spec), tuple(named))


def _mark_recomputed(forward_ops, backward, returned, regions) -> set[str]:
    """Add to each region the forward ops that ``backward`` computes again; the names of their results."""
    by_signature = {}
    for bsym in forward_ops:
        if (signature := _signature(bsym, lambda name: name)) is not None:
            by_signature.setdefault(signature, bsym)
    unpacked = {
        b.args[0].name: [out.name for out in b.flat_proxy_outs]
        for b in backward.bound_symbols
        if b.sym.name == "unpack_sequence" and hasattr(b.args[0], "name")
    }
    collections = unpacked.get("saved_for_backward", [])[:2]
    backward_to_forward = {}
    for collection, values in zip(collections, returned.args[1], strict=False):
        names = [getattr(value, "name", None) for value in values]
        backward_to_forward.update(
            (b, f) for b, f in zip(unpacked.get(collection, []), names, strict=True) if f is not None
        )
    recomputed = set()
    for bsym in _ops(backward.bound_symbols):
        signature = _signature(bsym, backward_to_forward.get)
        match = by_signature.get(signature) if signature is not None else None
        if match is None:
            continue
        pairs = [(b.name, f.name) for b, f in zip(bsym.flat_proxy_outs, match.flat_proxy_outs, strict=True)]
        backward_to_forward.update(pairs)
        recomputed.update(forward for _, forward in pairs)
        region = regions.get(_line(match))
        if region is not None and match.sym.name not in region.recomputed:
            region.recomputed.append(match.sym.name)
    return recomputed
