"""A failure's upstream.py: the shortest code that still shows the bug, for a thunder maintainer.

Plain torch and stock thunder, at most `MAX_LINES` lines: the network inlined as ordinary code (the builder's source
with its constants inlined, docstrings, ``PlainNet`` and unused imports taken out), then the check a maintainer would
write: a crash caught and its first line compared with the recorded one, `torch.testing.assert_close` against eager
for a wrong result, against float64 for an accuracy gap. Exit status as repro.py's (so it bisects alike): 1 the
recorded failure shows, 0 it does not, 2 anything else (an import error on another version, another exception).
"""

from __future__ import annotations

import ast
import copy

import torch

from fuzz.generate.program_source import input_arguments
from fuzz.generate.spec import NetSpec
from fuzz.judge.failures import ParityFailure, ThunderCrash
from fuzz.judge.tolerance import TOLERANCES
from fuzz.model_builder import network_source
from fuzz.report.specialize import specialized
from fuzz.report.upstream_runs import run_function

MAX_LINES = 40
# The names network_source defines for its constants: inlined as values, their assignments dropped.
_CONSTANTS = ("SEED", "DTYPE", "DEVICE", "INPUT_SHAPE", "OUTPUT_SHAPE", "OPTIMIZER", "BATCHES", "OUTPUT_SHAPES")
# An accuracy gap (bfloat16/float16) shows when thunderfx's error against float64 exceeds eager's this many times:
# the harness measures per tensor and relative to each tensor's scale (4x to 17x on the registered gaps), this check the
# largest absolute difference over all of them (2.7x on mish-bfloat16-grad-inaccurate's, where the harness saw 4.2x).
_ACCURACY_FACTOR = 2
# The op plumbing of `fuzz.generate.blocks`, computing the same values in fewer lines (its loops as math.prod, one
# name less): it is most of an op entry's lines (tests/unit/test_upstream.py checks each entry's network computes the
# builder's values, bit for bit).
_SHORTER_HELPERS = """
def adapt(x, shape, low, high, offset=0):
    count = math.prod(shape)
    flat = F.pad(x.reshape(-1), (0, max(0, count + offset - x.numel())))[offset : offset + count]
    wide = flat.reshape(shape).to(torch.promote_types(x.dtype, torch.float32))
    return (low + (high - low) * (torch.tanh(wide) + 1) / 2).to(x.dtype)
def spread(x, shape, low, high):
    steps = torch.arange(math.prod(shape), device=x.device, dtype=torch.promote_types(x.dtype, torch.float32))
    return (low + (high - low) * steps / max(math.prod(shape) - 1, 1)).reshape(shape).to(x.dtype)
def fold(y, like):
    flat = torch.cat([t.reshape(-1) for t in (y if isinstance(y, (tuple, list)) else (y,)) if t.is_floating_point()])
    return F.pad(flat.to(like.dtype), (0, max(0, like.numel() - flat.numel())))[: like.numel()].reshape(like.shape)
"""


class _Inlined(ast.NodeTransformer):
    """The constants replaced by their values; ``checkpointing`` fixed to True unless the network is random."""

    def __init__(self, values: dict[str, ast.expr], keep_flag: bool):
        self.values, self.keep_flag = values, keep_flag

    def visit_Name(self, node: ast.Name) -> ast.AST:
        if isinstance(node.ctx, ast.Load) and node.id in self.values:
            return copy.deepcopy(self.values[node.id])
        return node

    def visit_IfExp(self, node: ast.IfExp) -> ast.AST:
        return node if self.keep_flag or not _is_flag(node.test) else self.visit(node.body)

    def visit_If(self, node: ast.If) -> ast.AST | list[ast.stmt]:
        if self.keep_flag or not _is_flag(node.test):
            return self.generic_visit(node)
        return [self.visit(statement) for statement in node.body]


class _Qualified(ast.NodeTransformer):
    """``nn`` and ``F`` spelled ``torch.nn`` and ``torch.nn.functional``: two imports fewer."""

    _MODULES = {"nn": "torch.nn", "F": "torch.nn.functional"}

    def visit_Name(self, node: ast.Name) -> ast.AST:
        if node.id in self._MODULES and isinstance(node.ctx, ast.Load):
            return ast.parse(self._MODULES[node.id], mode="eval").body
        return node


def _is_flag(test: ast.expr) -> bool:
    return isinstance(test, ast.Name) and test.id == "checkpointing"


def _without_docstring(body: list[ast.stmt]) -> list[ast.stmt]:
    docstring = body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)
    return (body[1:] or [ast.Pass()]) if docstring and isinstance(body[0].value.value, str) else body


def _network(spec: NetSpec) -> tuple[list[ast.stmt], list[ast.stmt]]:
    """The imports and the code of ``spec``'s network: classes and helpers, then (unless the network is random, which
    keeps ``make_example(checkpointing)``) ``make_example``'s body at top level, which defines ``net``, ``x`` and
    ``cotangent``; a spec that trains keeps ``make_batches()``."""
    module = ast.parse(network_source(spec))
    shorter = {node.name: node for node in ast.parse(_SHORTER_HELPERS).body if isinstance(node, ast.FunctionDef)}
    module.body = [shorter.get(getattr(node, "name", None), node) for node in module.body]
    values = {
        target.id: node.value
        for node in module.body
        if isinstance(node, ast.Assign)
        for target in node.targets
        if isinstance(target, ast.Name) and target.id in _CONSTANTS
    }
    imports, code = [], []
    for node in _Qualified().visit(_Inlined(values, spec.random).visit(module)).body:
        if isinstance(node, ast.Import | ast.ImportFrom):
            imports.append(node)
        elif isinstance(node, ast.Assign) and all(getattr(t, "id", None) in _CONSTANTS for t in node.targets):
            continue
        elif isinstance(node, ast.ClassDef) and node.name == "PlainNet" and not spec.random:
            continue
        elif isinstance(node, ast.FunctionDef) and node.name == "make_example" and not spec.random:
            code += [s for s in _without_docstring(node.body) if not isinstance(s, ast.Return)]
        elif isinstance(node, ast.FunctionDef) and node.name == "make_batches" and not spec.random:
            continue  # `run_function` draws every training step's batch itself
        else:
            code.append(node)
    for node in ast.walk(ast.Module(code, [])):
        if isinstance(node, ast.FunctionDef | ast.ClassDef):
            node.body = _without_docstring(node.body)
    for _ in range(4):  # a helper's constants may come from another's, specialized the round before
        before = ast.unparse(ast.Module(code, []))
        code = specialized(code)
        if ast.unparse(ast.Module(code, [])) == before:
            break
    for node in code:
        if isinstance(node, ast.ClassDef):  # an __init__ that only calls super().__init__() goes
            node.body = [s for s in node.body if not _trivial_init(s)] or [ast.Pass()]
    for node in ast.walk(ast.Module(code, [])):
        if isinstance(node, ast.FunctionDef):
            node.body = _returned_directly(node.body)
    _checkpoint_modules_directly(code)
    if not spec.random:
        code = _as_sequential(code)
    code = _referenced(code)
    ast.fix_missing_locations(ast.Module(code, []))  # (the nodes made here: the code compiles as it unparses)
    return imports, code


def _returned_directly(body: list[ast.stmt]) -> list[ast.stmt]:
    """``x = <expr>; return x`` as ``return <expr>``."""
    if len(body) >= 2 and isinstance(body[-1], ast.Return) and isinstance(body[-2], ast.Assign):
        (target,), value, returned = body[-2].targets, body[-2].value, body[-1].value
        if isinstance(target, ast.Name) and isinstance(returned, ast.Name) and returned.id == target.id:
            return [*body[:-2], ast.Return(value)]
    return body


def _checkpoint_modules_directly(code: list[ast.stmt]) -> None:
    """A method that only returns one of its class's layers applied to its one argument (``def checkpointed0(self, x):
    return self.layer0(x)``) goes where nothing but ``checkpoint(...)`` uses it: that checkpoints the layer
    (``checkpoint(self.layer0, x, ...)``)."""
    methods: dict[str, str] = {}
    for cls in (node for node in code if isinstance(node, ast.ClassDef)):
        for node in cls.body:
            if isinstance(node, ast.FunctionDef) and node.name != "forward" and len(node.args.args) == 2:
                returned = node.body[0].value if len(node.body) == 1 and isinstance(node.body[0], ast.Return) else None
                layer = (
                    returned.func.attr
                    if isinstance(returned, ast.Call) and isinstance(returned.func, ast.Attribute)
                    else ""
                )
                if layer and ast.unparse(returned) == f"self.{layer}({node.args.args[1].arg})":
                    methods[node.name] = layer
    module = ast.Module(code, [])
    uses = [n for n in ast.walk(module) if isinstance(n, ast.Attribute) and n.attr in methods]
    checkpointed = [
        n.args[0]
        for n in ast.walk(module)
        if isinstance(n, ast.Call) and ast.unparse(n.func) == "checkpoint" and n.args
    ]
    # A method used other than as what checkpoint(...) runs stays (PlainNet calls it directly).
    elsewhere = {use.attr for use in uses if all(use is not first for first in checkpointed)}
    methods = {name: layer for name, layer in methods.items() if name not in elsewhere}
    uses = [use for use in uses if use.attr in methods]
    for use in uses:
        use.attr = methods[use.attr]
    for cls in (node for node in code if isinstance(node, ast.ClassDef)):
        cls.body = [node for node in cls.body if getattr(node, "name", None) not in methods]


def _as_sequential(code: list[ast.stmt]) -> list[ast.stmt]:
    """``code`` with a ``Net`` that only applies its layers one after the other, in the order it makes them, written
    ``torch.nn.Sequential(...)`` where it is made (the same modules made in the same order: the same parameters)."""
    net = next((n for n in code if isinstance(n, ast.ClassDef) and n.name == "Net"), None)
    methods = {n.name: n for n in net.body if isinstance(n, ast.FunctionDef)} if net else {}
    if set(methods) != {"__init__", "forward"} or len(net.body) != 2:
        return code
    first, *made = methods["__init__"].body
    if ast.unparse(first) != "super().__init__()" or not all(
        isinstance(s, ast.Assign) and ast.unparse(s.targets[0]).startswith("self.") for s in made
    ):
        return code
    layers = [ast.unparse(s.targets[0]) for s in made]
    applied = [f"x = {layer}(x)" for layer in layers[:-1]] + [f"return {layers[-1]}(x)"] if layers else []
    if [ast.unparse(s) for s in methods["forward"].body] != applied or len(layers) != len(set(layers)):
        return code
    named, outside = {layer.removeprefix("self.") for layer in layers}, [n for n in code if n is not net]
    if any(isinstance(n, ast.Attribute) and n.attr in named for n in ast.walk(ast.Module(outside, []))):
        return code  # a layer is named outside (a checkpoint wrapper applied to net.layer0)
    sequential = ast.parse("torch.nn.Sequential()", mode="eval").body
    sequential.args = [s.value for s in made]
    for node in ast.walk(ast.Module(outside, [])):
        if isinstance(node, ast.Call) and ast.unparse(node) == "Net()":
            node.func, node.args = sequential.func, sequential.args
    return outside


def _trivial_init(node: ast.stmt) -> bool:
    return isinstance(node, ast.FunctionDef) and node.name == "__init__" and len(node.body) == 1


def _referenced(code: list[ast.stmt]) -> list[ast.stmt]:
    """``code`` without the top-level functions nothing else uses (the builder's helpers a network may not need)."""
    while True:
        used = {n.id for n in ast.walk(ast.Module(code, [])) if isinstance(n, ast.Name)}
        unused = [
            n for n in code if isinstance(n, ast.FunctionDef) and n.name not in used | {"make_batches", "make_example"}
        ]
        if not unused:
            return code
        code = [n for n in code if n not in unused]


def _used_imports(imports: list[ast.stmt], used: set[str]) -> list[str]:
    """``imports`` keeping only the names in ``used``, as source lines."""
    lines = []
    for node in imports:
        names = [a for a in node.names if (a.asname or a.name).split(".")[0] in used]
        if names:
            kept = copy.copy(node)
            kept.names = names
            lines.append(ast.unparse(kept))
    return lines


def _check(spec: NetSpec, failure: ParityFailure, thunder_version: str) -> list[str]:
    """The lines that run eager and thunderfx and exit 1 where ``failure`` shows."""
    seen = f"recorded on thunder {thunder_version}: {_first_line(failure)}"
    if spec.random:  # eager and thunder draw different random numbers: thunderfx without checkpoints is the truth
        setup = [
            "net, x, cotangent = make_example(True)",
            "plain = make_example(False)[0]",
            "expected = run(plain, thunderfx(plain))",
        ]
    else:
        setup = ["eager = copy.deepcopy(net)", "expected = run(eager, eager)"]
    if isinstance(failure, ThunderCrash):
        plain = not (spec.training or input_arguments(spec))
        return _crash_check(
            failure, "thunderfx(net)(x).backward(cotangent)" if plain else "run(net, thunderfx(net))", seen
        )
    if failure.failure_class == "timeout":
        limit = failure.limit_s
        return [
            "thunderfx(torch.nn.Linear(1, 1))(torch.ones(1, 1)).sum().backward()  # thunder's one-off set-up first",
            f"timer = threading.Timer({limit:g}, lambda: print('thunderfx still runs after {limit:g} s')"
            " or os._exit(1))",
            "timer.daemon = True",
            "timer.start()",
            "run(net, thunderfx(net))",
            'print("thunderfx finished in time: not reproduced")',
        ]
    if failure.failure_class == "accuracy":
        return [
            "eager, double = copy.deepcopy(net), copy.deepcopy(net).double()",
            "expected = run(eager, eager)",
            "actual = run(net, thunderfx(net))",
            "x, cotangent = fresh(x, torch.float64), cotangent.double()"
            if input_arguments(spec)
            else "x, cotangent = x.double() if x.is_floating_point() else x, cotangent.double()",
            "reference = run(double, double)",
            "def error(result):  # the largest difference from the float64 reference",
            "    return max((a.double() - r).abs().max().item() for a, r in zip(result, reference) if r is not None)",
            'print(f"error against float64: thunderfx {error(actual):.3g}, eager {error(expected):.3g}")',
            f"sys.exit(1 if error(actual) > {_ACCURACY_FACTOR} * error(expected) else 0)  # {seen}",
        ]
    rtol, atol = TOLERANCES[getattr(torch, spec.precision)][:2]
    return [
        *setup,
        "actual = run(net, thunderfx(net))",
        "try:",
        f"    torch.testing.assert_close(actual, expected, rtol={rtol:g}, atol={atol:g})  # the harness's tolerances",
        f"except AssertionError as error:  # {seen}",
        "    sys.exit(print(error) or 1)",
        'print("thunderfx matches: not reproduced")',
    ]


def _crash_check(failure: ThunderCrash, call: str, seen: str) -> list[str]:
    """The lines that make ``call`` and exit 1 where it raises the crash ``failure`` (its signature, as
    `fuzz.judge.tolerance.crash_signature` reads it)."""
    name, text = ("name", "text") if _wrapped(failure) else ("type(error).__name__", "str(error)")
    return [
        f"RECORDED = {failure.crash_signature!r}",
        "try:",
        f"    {call}",
        f"except Exception as error:  # {seen}",
        *(  # (`fuzz.judge.tolerance.crash_signature`: dynamo's wrapper, the exception it wraps on its next line)
            [
                "    name, text = type(error).__name__, str(error)",
                '    if name == "BackendCompilerFailed":',
                '        name, text = [line for line in text.splitlines() if line.strip()][1].split(": ", 1)',
            ]
            if _wrapped(failure)
            else []
        ),
        '    first = re.sub(r"\\{[^{}]*\\}", "{...}", (TEXT.strip().splitlines() or [""])[0])'.replace("TEXT", text),
        '    signature = f"{NAME}: " + re.sub(r"0x[0-9a-fA-F]+|\\d+(?:\\.\\d+)?", "#", first)[:200]'.replace(
            "NAME", name
        ),
        "    sys.exit(print(signature) or (1 if signature == RECORDED else 2))",
        'print("thunderfx runs: not reproduced")',
    ]


def _wrapped(failure: ParityFailure) -> bool:
    """Whether ``failure`` is a crash dynamo wrapped (a backend's exception raised while dynamo compiled)."""
    return str(failure).startswith("thunderfx raised BackendCompilerFailed: ")


def _first_line(failure: ParityFailure) -> str:
    """The failure's first line, shortened for a comment."""
    line = (str(failure).splitlines() or [""])[0]
    return line if len(line) <= 160 else line[:157] + "..."


def upstream_source(spec: NetSpec, failure: ParityFailure, title: str, thunder_version: str) -> str:
    """``spec``'s upstream.py for ``failure`` (found on thunder ``thunder_version``), headed by ``title``."""
    imports, code = _network(spec)
    check = _check(spec, failure, thunder_version)
    if any("run(" in line for line in check):
        check = [*run_function(spec, failure.failure_class == "state-divergence"), *check]
    check_names = {n.id for n in ast.walk(ast.parse("\n".join(check))) if isinstance(n, ast.Name)}
    if spec.training is not None and not spec.random and "x" not in check_names:  # `run` draws its own batches
        drawn = {"generator", "x", "cotangent"}
        code = [n for n in code if not (isinstance(n, ast.Assign) and ast.unparse(n.targets[0]) in drawn)]
    used = {n.id for n in ast.walk(ast.Module(code, [])) if isinstance(n, ast.Name)} | check_names
    ours = [name for name in ("copy", "math", "os", "re", "sys", "threading") if name in used or name == "sys"]
    if "os" not in ours:
        ours.insert(0, "os")
    header = [
        f'"""{_docstring_safe(title)}. Exit 1: the recorded failure shows; 0: it does not; 2: anything else."""',
        f"import {', '.join(sorted(ours))}",
        "sys.excepthook = lambda *e: (sys.__excepthook__(*e), os._exit(2))  # exit 2: anything unexpected",
        *_used_imports(imports, used),
        "from thunder.dynamo import thunderfx",
    ]
    # No blank lines inside: MAX_LINES counts every line.
    network = [line for node in code for line in ast.unparse(node).splitlines() if line.strip()]
    return "\n".join([*header, *network, *check]) + "\n"


def _docstring_safe(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"""', "'''")
