"""The op family's vocabulary, read from thunder's own OpInfo database and checked eagerly.

For every OpInfo (`thunder.tests.opinfos`) whose torch callable thunder's checkpoint converter
maps (`thunder.torch._torch_to_thunder_function_map`) and whose sample inputs are
differentiable, each distinct argument variant of its samples becomes literal call arguments
(`fuzz.generate.ops`), in every call form torch has for it (function, tensor method, in-place method,
`nn` module), and is run eagerly, forward and backward, through the layer's own source in each
dtype. What survives is drawable; every op left out is listed with the reason. The result is
cached per torch/thunder version (building it takes about 15 s), so workers read a file.
"""

from __future__ import annotations

import contextlib
import hashlib
import inspect
import json
import random
import warnings
import zlib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from importlib.metadata import version
from pathlib import Path
from typing import Any

from fuzz.cache import cache_root, write_atomically
from fuzz.generate import axes, literals, ops
from fuzz.generate.literals import NotLiteral, encode, explicit_arguments, shape_free, size_order
from fuzz.generate.spec_parts import DTYPES

MAX_VARIANTS = 6  # argument variants per op, simplest first: the sweep runs each in every form
# Ops that draw random numbers: networks with them are judged by another oracle (dropout has its own kind).
_RANDOM_OPS = {"bernoulli": "draws random numbers", "rrelu": "draws random numbers in training mode"}


@dataclass(frozen=True)
class OpCall:
    """One drawable call: an op's argument variant in one call form, and the dtypes it runs eagerly in."""

    op: str
    form: str
    target: str
    args: list
    kwargs: dict
    dtypes: tuple[str, ...]
    variant: int  # index among the op's variants: 0 is the simplest (fewest explicit arguments)
    # `fuzz.generate.axes` mutations of the call that run eagerly in float32 and float64, in `axes.AXES` order.
    mutations: tuple[dict, ...] = ()

    @property
    def kind(self) -> str:
        """The layer kind of this call (`fuzz.generate.layers`)."""
        return "op_module" if self.form == "module" else "op"

    @property
    def params(self) -> dict[str, Any]:
        """The layer's params (`fuzz.generate.layers` kinds ``op`` and ``op_module``)."""
        params = {"op": self.op, "target": self.target, "args": self.args, "kwargs": self.kwargs}
        return params if self.form == "module" else {**params, "form": self.form}


@dataclass(frozen=True)
class Catalog:
    """The drawable calls in a deliberate order (thunder's op order, simplest variant and form first)."""

    calls: tuple[OpCall, ...]
    mapped_differentiable: tuple[str, ...]  # every differentiable op thunder's converter maps
    excluded: dict[str, str]  # op -> why it cannot be drawn
    versions: dict[str, str]

    @property
    def ops(self) -> tuple[str, ...]:
        """The drawable ops, in the catalog's order."""
        return tuple(dict.fromkeys(call.op for call in self.calls))


def _torch_callables() -> dict[str, dict[str, str]]:
    """Callable name -> {form: dotted target} for what the converter maps (functions and Tensor methods)."""
    import torch
    import torch.nn.functional as F
    from thunder.torch import _torch_to_thunder_function_map

    mapped = {id(f) for f in _torch_to_thunder_function_map}
    namespaces = (("torch", torch), ("torch.nn.functional", F), ("torch.special", torch.special))
    found: dict[str, dict[str, str]] = {}
    for callable_ in _torch_to_thunder_function_map:
        name = getattr(callable_, "__name__", None)
        if not isinstance(name, str):
            continue
        for path, namespace in namespaces:
            if getattr(namespace, name, None) is callable_:
                found.setdefault(name, {}).setdefault("function", f"{path}.{name}")
        if getattr(torch.Tensor, name, None) is callable_:
            found.setdefault(name, {})["method"] = name
            if id(getattr(torch.Tensor, f"{name}_", None)) in mapped:
                found[name]["inplace"] = f"{name}_"
    return found


def _module_class(name: str) -> tuple[str, list[str], set[str]] | None:
    """``torch.nn``'s module for op ``name`` (same name, case and underscores aside), its functional's args."""
    import torch
    import torch.nn.functional as F

    wanted = name.replace("_", "").lower()
    classes = [c for c in vars(torch.nn.modules).values() if isinstance(c, type) and c.__name__.lower() == wanted]
    function = getattr(F, name, None)
    if not classes or function is None:
        return None
    try:
        arg_names = list(inspect.signature(function).parameters)
        init_names = set(inspect.signature(classes[0].__init__).parameters) - {"self"}
    except (TypeError, ValueError):  # builtins without a signature
        return None
    return f"torch.nn.{classes[0].__name__}", arg_names[1:], init_names


def _forms(
    targets: dict[str, str], module: tuple[str, list[str], set[str]] | None, args: list, kwargs: dict
) -> list[tuple[str, str, list, dict]]:
    """The call forms of one variant: (form, target, args, kwargs)."""
    forms = [("function", targets["function"], args, kwargs)] if "function" in targets else []
    receiver = bool(args) and isinstance(args[0], dict) and "tensor" in args[0]
    for form in ("method", "inplace"):
        if form in targets and receiver:
            forms.append((form, targets[form], args, kwargs))
    if module and receiver and not any(isinstance(a, dict) and "tensor" in a for a in [*args[1:], *kwargs.values()]):
        target, arg_names, init_names = module
        # The functional's positional arguments by its own names; the module must take each as a keyword.
        named = {**dict(zip(arg_names, args[1:], strict=False)), **kwargs}
        if len(args) - 1 <= len(arg_names) and set(named) <= init_names:
            forms.append(("module", target, args[:1], named))
    return forms


def _runs_eagerly(form: str, target: str, args: list, kwargs: dict, dtype: str) -> str | None:
    """None when the layer's source runs forward and backward with finite values in ``dtype``; else why not."""
    import torch
    import torch.nn.functional as F
    from torch import nn

    params = {"form": form, "target": target, "args": args, "kwargs": kwargs}
    from fuzz.generate import blocks

    namespace = {"torch": torch, "F": F, "nn": nn, **{name: getattr(blocks, name) for name in ops.HELPERS}}
    try:
        if form == "module":
            namespace["module"] = eval(ops.module_source(params), namespace)
        layer = eval(f"lambda x: {ops.call_source(params, 'module')}", namespace)
        generator = torch.Generator().manual_seed(0)
        x = torch.randn(2, 5, generator=generator).to(getattr(torch, dtype)).requires_grad_()
        y = layer(x)
        y.backward(torch.randn(y.shape, generator=generator).to(y.dtype))
    except Exception as error:
        return f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"[:200]
    if x.grad is None or not bool(torch.isfinite(y).all() and torch.isfinite(x.grad).all()):
        return "non-finite output or gradient"
    return None


MUTATION_DTYPES = ("float32", "float64")  # a network's dtype and its reference's; others draw no varied call


def _valid_mutations(
    form: str, target: str, args: list, kwargs: dict, elsewhere: Mapping[str, dict] | None = None
) -> tuple[dict, ...]:
    """The `fuzz.generate.axes.candidates` of a call (``elsewhere``: the tensors other calls of its op pass,
    `axes.tensors_passed`, for the optional axis's "present" class) that run eagerly in `MUTATION_DTYPES`. An
    integer (or a list of them) counts as a dim only where eager rejects a dim out of range as such (learned from
    eager's own error, once per place): only a dim is varied as one, and an integer that is one is not varied as a
    scalar."""
    params = {"args": args, "kwargs": kwargs}
    dims: dict[str, bool] = {}

    def is_dim(edit: dict) -> bool:
        place = json.dumps(edit["at"])
        if place not in dims:
            probe = axes.mutated(params, axes.dim_probe(edit["at"], edit["sample"]))
            reason = _runs_eagerly(form, target, probe["args"], probe["kwargs"], "float32") or ""
            dims[place] = "Dimension out of range" in reason
        return dims[place]

    kept = []
    for mutation in axes.candidates(args, kwargs, elsewhere):
        edit = mutation["edits"][-1]
        if mutation["axis"] in ("dim", "dims") and not is_dim(edit):
            continue
        if mutation["axis"] == "scalar" and not isinstance(edit["sample"], float) and is_dim(edit):
            continue
        changed = axes.mutated(params, mutation)
        if all(_runs_eagerly(form, target, changed["args"], changed["kwargs"], d) is None for d in MUTATION_DTYPES):
            kept.append(mutation)
    return tuple(kept)


def _op_dtypes(opinfo) -> set[str]:
    return {str(d).removeprefix("thunder.dtypes.") for d in opinfo.dtypes()} & set(DTYPES)


def _variants(opinfo) -> tuple[list[tuple[list, dict]], str | None]:
    """The op's distinct literal argument variants (simplest first), or why there are none."""
    import thunder

    reasons = []
    variants: dict[str, tuple[list, dict]] = {}
    for sample in opinfo.sample_inputs("cpu", thunder.float32, requires_grad=True):
        tensors: list = []
        try:
            args = [encode(a, tensors) for a in sample.args]
            kwargs = {k: encode(v, tensors) for k, v in sample.kwargs.items()}
        except NotLiteral as reason:
            reasons.append(str(reason))
            continue
        if not tensors:
            reasons.append("no float tensor argument")
            continue
        key = json.dumps(shape_free([args, kwargs]), sort_keys=True)
        if key not in variants or size_order([args, kwargs]) < size_order(list(variants[key])):
            variants[key] = (args, kwargs)
    ordered = sorted(variants.values(), key=lambda v: (explicit_arguments(*v), size_order(list(v))))
    return ordered[:MAX_VARIANTS], (f"no literal sample: {', '.join(sorted(set(reasons)))}" if reasons else None)


def _differentiable(opinfo) -> bool:
    """Some float32 sample of the op gives an output that requires grad (eagerly, through its torch reference)."""
    import thunder
    import torch

    for sample in opinfo.sample_inputs("cpu", thunder.float32, requires_grad=True):
        try:
            result = opinfo.torch_reference(*sample.args, **sample.kwargs)
        except Exception:
            continue
        results = result if isinstance(result, tuple | list) else (result,)
        if any(isinstance(r, torch.Tensor) and r.requires_grad for r in results):
            return True
    return False


def build_catalog() -> Catalog:
    """Read thunder's OpInfos and check every candidate call eagerly (about 15 s; see `catalog`)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # sample generators and torch references warn on many samples
        return _build_catalog()


@contextlib.contextmanager
def _seeded_samples(name: str) -> Iterator[None]:
    """Seed the random generators OpInfo sample inputs are drawn from with ``name``'s own seed, and put back the
    callers' states afterwards: a catalog built after other work (a test, another op) holds the same literals."""
    import torch

    state = random.getstate()
    with torch.random.fork_rng(devices=[]):
        seed = zlib.crc32(name.encode())
        torch.manual_seed(seed)
        random.seed(seed)
        try:
            yield
        finally:
            random.setstate(state)


def _build_catalog(opinfos: Sequence[Any] | None = None) -> Catalog:
    if opinfos is None:
        from thunder.tests.opinfos import opinfos

    callables = _torch_callables()
    calls: list[OpCall] = []
    mapped: list[str] = []
    excluded: dict[str, str] = {}
    for opinfo in opinfos:
        with _seeded_samples(opinfo.name):
            reference = getattr(opinfo.torch_reference, "__name__", None)
            names = [n for n in (reference, opinfo.name, opinfo.name.removeprefix("torch_")) if n in callables]
            if not names or opinfo.name in mapped:
                continue
            targets = callables[names[0]]
            try:
                if not _differentiable(opinfo):
                    continue
            except Exception as error:
                excluded[opinfo.name] = f"its sample generator failed: {type(error).__name__}"
                continue
            mapped.append(opinfo.name)
            if opinfo.name in _RANDOM_OPS:
                excluded[opinfo.name] = _RANDOM_OPS[opinfo.name]
                continue
            variants, reason = _variants(opinfo)
            module = _module_class(names[0])
            failures: list[str] = []
            dtypes = _op_dtypes(opinfo) or set(DTYPES)
            kept: list[tuple[int, str, str, list, dict, tuple[str, ...]]] = []
            for number, (args, kwargs) in enumerate(variants):
                for form, target, form_args, form_kwargs in _forms(targets, module, args, kwargs):
                    results = {d: _runs_eagerly(form, target, form_args, form_kwargs, d) for d in DTYPES if d in dtypes}
                    passing = tuple(d for d, failure in results.items() if failure is None)
                    failures += [failure for failure in results.values() if failure]
                    if "float64" in passing:  # the float64 reference run of every dtype needs it
                        kept.append((number, form, target, form_args, form_kwargs, passing))
            for number, form, target, form_args, form_kwargs, passing in kept:
                elsewhere = axes.tensors_passed([(a, k) for _, f, _, a, k, _ in kept if f == form])
                mutations = _valid_mutations(form, target, form_args, form_kwargs, elsewhere)
                calls.append(OpCall(opinfo.name, form, target, form_args, form_kwargs, passing, number, mutations))
            if not any(call.op == opinfo.name for call in calls):
                excluded[opinfo.name] = reason or f"no variant runs eagerly through the layer: {failures[:1]}"
    return Catalog(tuple(calls), tuple(mapped), excluded, _versions())


def _versions() -> dict[str, str]:
    return {package: version(package) for package in ("torch", "lightning-thunder")}


def _cache_path() -> Path:
    """The cache file of this code, these dtypes and the installed torch and thunder (an editable thunder
    install keeps its version while its OpInfos change: their file's modification time counts too)."""
    from importlib.util import find_spec

    opinfos = Path(find_spec("thunder").submodule_search_locations[0]) / "tests" / "opinfos.py"
    key = [
        *(Path(m.__file__).read_text() for m in (ops, literals, axes)),
        Path(__file__).read_text(),
        DTYPES,
        _versions(),
        opinfos.stat().st_mtime,
    ]
    digest = hashlib.sha1(json.dumps(key, sort_keys=True).encode()).hexdigest()[:12]
    return cache_root() / f"op-catalog-{digest}.json"


def _to_dict(catalog: Catalog) -> dict[str, Any]:
    return {
        "versions": catalog.versions,
        "mapped_differentiable": list(catalog.mapped_differentiable),
        "excluded": catalog.excluded,
        "calls": [
            {**vars(call), "dtypes": list(call.dtypes), "mutations": list(call.mutations)} for call in catalog.calls
        ],
    }


def _from_dict(data: dict[str, Any]) -> Catalog:
    calls = tuple(
        OpCall(**{**call, "dtypes": tuple(call["dtypes"]), "mutations": tuple(call["mutations"])})
        for call in data["calls"]
    )
    return Catalog(calls, tuple(data["mapped_differentiable"]), dict(data["excluded"]), dict(data["versions"]))


@cache
def catalog() -> Catalog:
    """The catalog of the installed torch and thunder: read from the cache, else built and cached."""
    path = _cache_path()
    if path.exists():
        return _from_dict(json.loads(path.read_text()))
    built = build_catalog()
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomically(path, json.dumps(_to_dict(built)))  # (workers building at once all write the same)
    return built


if __name__ == "__main__":  # python -m fuzz.generate.op_catalog: what the installed thunder offers the op family
    found = catalog()
    print(json.dumps({**_to_dict(found), "calls": len(found.calls), "ops": list(found.ops)}, indent=1))
