"""The builder's generic helpers specialized to the one case a network uses, for upstream.py (`specialized`): a
partial evaluation over the AST of the network's source."""

from __future__ import annotations

import ast
import copy


def specialized(code: list[ast.stmt]) -> list[ast.stmt]:
    """``code`` with the builder's generic helpers specialized to the one case the network uses: a function or a
    class every call of which passes the same constant for a parameter gets that constant in its body (a class's
    ``self.<name>`` set from it, too), and branches on constants are folded away."""
    calls = [n for n in ast.walk(ast.Module(code, [])) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)]
    for node in code:
        function = node if isinstance(node, ast.FunctionDef) else _init_of(node)
        sites = [c for c in calls if isinstance(node, ast.FunctionDef | ast.ClassDef) and c.func.id == node.name]
        if function is None or not sites or function.args.vararg or function.args.kwarg:
            continue
        constants = _common_constants(function, sites, method=function is not node)
        if not constants:
            continue
        attributes = _attributes_of(function, constants) if function is not node else {}
        for site in sites:
            _drop_arguments(site, function, list(constants), method=function is not node)
        _drop_parameters(function.args, constants)
        for a in [*function.args.args, *function.args.kwonlyargs]:
            a.annotation = None
        _Folded(constants, attributes).visit(node)
    return code


def _drop_parameters(arguments: ast.arguments, constants: dict[str, ast.Constant]) -> None:
    """The parameters named in ``constants`` taken out of ``arguments``, each other one keeping its own default."""
    positional = arguments.args
    with_default = [a.arg for a in positional[len(positional) - len(arguments.defaults) :]]
    defaults = dict(zip(with_default, arguments.defaults, strict=True))
    arguments.args = [a for a in positional if a.arg not in constants]
    arguments.defaults = [defaults[a.arg] for a in arguments.args if a.arg in defaults]
    keyword_only = zip(arguments.kwonlyargs, arguments.kw_defaults, strict=True)
    keywords = [(a, d) for a, d in keyword_only if a.arg not in constants]
    arguments.kwonlyargs, arguments.kw_defaults = [a for a, _ in keywords], [d for _, d in keywords]


def _init_of(node: ast.stmt) -> ast.FunctionDef | None:
    if isinstance(node, ast.ClassDef):
        return next((s for s in node.body if isinstance(s, ast.FunctionDef) and s.name == "__init__"), None)
    return None


def _common_constants(function: ast.FunctionDef, sites: list[ast.Call], method: bool) -> dict[str, ast.Constant]:
    """The parameters of ``function`` every call in ``sites`` passes the same constant for."""
    assigned = {n.id for n in ast.walk(function) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    names = [a.arg for a in [*function.args.args, *function.args.kwonlyargs]][1 if method else 0 :]
    common: dict[str, ast.Constant] | None = None
    for site in sites:
        passed = dict(zip(names, site.args, strict=False)) | {k.arg: k.value for k in site.keywords if k.arg}
        here = {n: v for n, v in passed.items() if isinstance(v, ast.Constant) and n in names and n not in assigned}
        if common is None:
            common = here
        else:
            common = {k: v for k, v in common.items() if k in here and here[k].value == v.value}
    return common or {}


def _attributes_of(init: ast.FunctionDef, constants: dict[str, ast.Constant]) -> dict[str, ast.Constant]:
    """``self.<name>`` that ``init`` sets from ``constants`` (those assignments taken out)."""
    attributes: dict[str, ast.Constant] = {}
    kept = []
    for statement in init.body:
        if isinstance(statement, ast.Assign) and len(statement.targets) == 1:
            target, value = statement.targets[0], statement.value
            pairs = (
                list(zip(target.elts, value.elts, strict=False))
                if isinstance(target, ast.Tuple) and isinstance(value, ast.Tuple)
                else [(target, value)]
            )
            if all(isinstance(t, ast.Attribute) and isinstance(v, ast.Name) and v.id in constants for t, v in pairs):
                attributes |= {t.attr: constants[v.id] for t, v in pairs}
                continue
        kept.append(statement)
    init.body = kept
    return attributes


def _drop_arguments(site: ast.Call, function: ast.FunctionDef, names: list[str], method: bool) -> None:
    positional = [a.arg for a in function.args.args][1 if method else 0 :]
    site.args = [a for name, a in zip(positional, site.args, strict=False) if name not in names]
    site.keywords = [k for k in site.keywords if k.arg not in names]


class _Folded(ast.NodeTransformer):
    """Constants (and ``self.<attribute>`` set from them) substituted; comparisons, conditional expressions and
    ``if`` statements on constants folded; statements after a ``return`` dropped."""

    def __init__(self, constants: dict[str, ast.Constant], attributes: dict[str, ast.Constant]):
        self.constants, self.attributes = constants, attributes

    def visit_Name(self, node: ast.Name) -> ast.AST:
        return (
            copy.deepcopy(self.constants[node.id])
            if isinstance(node.ctx, ast.Load) and node.id in self.constants
            else node
        )

    def visit_Attribute(self, node: ast.Attribute) -> ast.AST:
        is_self = isinstance(node.value, ast.Name) and node.value.id == "self"
        if is_self and isinstance(node.ctx, ast.Load) and node.attr in self.attributes:
            return copy.deepcopy(self.attributes[node.attr])
        return self.generic_visit(node)

    def visit_Compare(self, node: ast.Compare) -> ast.AST:
        node = self.generic_visit(node)
        parts = [node.left, *node.comparators]
        if len(node.ops) == 1 and all(isinstance(p, ast.Constant) for p in parts):
            equal = parts[0].value == parts[1].value
            if isinstance(node.ops[0], ast.Eq | ast.NotEq):
                return ast.Constant(equal if isinstance(node.ops[0], ast.Eq) else not equal)
        return node

    def visit_IfExp(self, node: ast.IfExp) -> ast.AST:
        node = self.generic_visit(node)
        if isinstance(node.test, ast.Constant):
            return node.body if node.test.value else node.orelse
        return node

    def visit_If(self, node: ast.If) -> ast.AST | list[ast.stmt]:
        node = self.generic_visit(node)
        if isinstance(node.test, ast.Constant):
            return (node.body if node.test.value else node.orelse) or [ast.Pass()]
        return node

    def generic_visit(self, node: ast.AST) -> ast.AST:
        node = super().generic_visit(node)
        for field in ("body", "orelse"):
            body = getattr(node, field, None)
            if isinstance(body, list) and body and isinstance(body[0], ast.stmt):
                ended = next((i for i, s in enumerate(body) if isinstance(s, ast.Return)), None)
                kept = body if ended is None else body[: ended + 1]
                setattr(node, field, [s for s in kept if not isinstance(s, ast.Pass)] or [ast.Pass()])
        return node
