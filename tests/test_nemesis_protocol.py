"""The nemesis holds its cluster typed against harness.brokers.protocol, and calls on it only
what that protocol declares: so it can never again call a method only one implementation
(ComposeCluster, a plug-in) has, and what is typed ``NodeAccess`` (nemesis/net.py's node
access) uses node access alone.

By AST over nemesis/*.py: a variable is a cluster when it is a parameter or name annotated
``NodeAccess`` / ``Cluster`` (bare, ``protocol.X``, ``X | None``, or a string), an attribute
declared so on a class or ``self`` (``Ctx.cluster``, ``Heals.cluster``, ``Nemesis.cluster``:
then ``<anything>.cluster``), anything named ``cluster``, or a name assigned from one of these
(``c = ctx.cluster``). Every attribute read, set or called on it, and every
``getattr(it, "name")``, must be declared on the protocol it is typed against (one only named
``cluster``: on ``Cluster``)."""
from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

from harness.brokers.protocol import Cluster, NodeAccess

ROOT = Path(__file__).resolve().parent.parent
# nemesis/grudge.py is pure functions over node names; nemesis/lazyfs.py is copied into the
# containers (stdlib only): neither holds a cluster
SKIP = {"grudge.py", "lazyfs.py"}
MODULES = sorted(p for p in (ROOT / "nemesis").rglob("*.py") if p.name not in SKIP)
PROTOCOLS: dict[str, type] = {"NodeAccess": NodeAccess, "Cluster": Cluster}
NAME = "cluster"  # what the nemesis calls a cluster wherever it holds one


def _declared(cls: type) -> set[str]:
    names = set(dir(cls))
    for k in cls.__mro__:
        names |= set(getattr(k, "__annotations__", {}))
    return names


def _protocol_of(ann: ast.expr | None) -> str | None:
    """"NodeAccess" / "Cluster" when the annotation names one of them, else None."""
    if ann is None:
        return None
    if isinstance(ann, ast.Constant) and isinstance(ann.value, str):
        try:
            ann = ast.parse(ann.value, mode="eval").body
        except SyntaxError:
            return None
    if isinstance(ann, ast.BinOp) and isinstance(ann.op, ast.BitOr):  # X | None
        return _protocol_of(ann.left) or _protocol_of(ann.right)
    if isinstance(ann, ast.Subscript):  # Optional[X]
        return _protocol_of(ann.slice)
    name = ann.id if isinstance(ann, ast.Name) else ann.attr if isinstance(ann, ast.Attribute) else None
    return name if name in PROTOCOLS else None


@dataclass(frozen=True)
class Use:
    where: str     # path:line
    protocol: str  # what the variable is typed against
    attr: str


def _fields(trees: dict[str, ast.Module]) -> tuple[dict[str, str], list[str]]:
    """Attribute names declared as a cluster (class fields, ``self.x: Cluster = ...``), and
    the ``cluster`` fields typed as neither protocol."""
    fields, untyped = {NAME: "Cluster"}, []
    for rel, tree in trees.items():
        for node in ast.walk(tree):
            if not isinstance(node, ast.AnnAssign):
                continue
            target = node.target
            name = target.id if isinstance(target, ast.Name) else target.attr if isinstance(target, ast.Attribute) else None
            if name is None:
                continue
            kind = _protocol_of(node.annotation)
            is_field = isinstance(target, ast.Attribute) or any(
                isinstance(c, ast.ClassDef) and node in c.body for c in ast.walk(tree))
            if kind and is_field:
                fields[name] = kind
            elif name == NAME and is_field:
                untyped.append(f"{rel}:{node.lineno}: field {name!r} is {ast.unparse(node.annotation)}")
    return fields, untyped


class _Scan(ast.NodeVisitor):
    """The attributes used on clusters in one module, and its ``cluster`` parameters typed
    as neither protocol."""

    def __init__(self, rel: str, fields: dict[str, str]) -> None:
        self.rel, self.fields = rel, fields
        self.scopes: list[dict[str, str | None]] = [{}]
        self.uses: list[Use] = []
        self.untyped: list[str] = []

    def typed(self, expr: ast.expr) -> str | None:
        if isinstance(expr, ast.Name):
            for scope in reversed(self.scopes):
                if expr.id in scope:
                    return scope[expr.id] or ("Cluster" if expr.id == NAME else None)
            return "Cluster" if expr.id == NAME else None
        if isinstance(expr, ast.Attribute) and expr.attr in self.fields:
            return self.fields[expr.attr]
        return None

    def _function(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) -> None:
        for d in [*node.args.defaults, *node.args.kw_defaults]:
            if d is not None:
                self.visit(d)
        scope: dict[str, str | None] = {}
        a = node.args
        for arg in [*a.posonlyargs, *a.args, *a.kwonlyargs, *([a.vararg] if a.vararg else []),
                    *([a.kwarg] if a.kwarg else [])]:
            kind = _protocol_of(arg.annotation)
            scope[arg.arg] = kind
            if arg.arg == NAME and kind is None:
                what = ast.unparse(arg.annotation) if arg.annotation is not None else "unannotated"
                name = getattr(node, "name", "<lambda>")
                if not isinstance(node, ast.Lambda):  # a lambda cannot annotate
                    self.untyped.append(f"{self.rel}:{node.lineno}: {name}({NAME}) is {what}")
        if not isinstance(node, ast.Lambda):
            for d in node.decorator_list:
                self.visit(d)
        self.scopes.append(scope)
        for stmt in (node.body if isinstance(node.body, list) else [node.body]):
            self.visit(stmt)
        self.scopes.pop()

    visit_FunctionDef = visit_AsyncFunctionDef = visit_Lambda = _function

    def _bind(self, target: ast.expr, kind: str | None) -> None:
        if isinstance(target, ast.Name) and (kind or target.id != NAME):
            self.scopes[-1][target.id] = kind

    def visit_Assign(self, node: ast.Assign) -> None:
        self.generic_visit(node)
        kind = self.typed(node.value)
        for t in node.targets:
            self._bind(t, kind)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        self.generic_visit(node)
        self._bind(node.target, _protocol_of(node.annotation) or (self.typed(node.value) if node.value else None))

    def visit_NamedExpr(self, node: ast.NamedExpr) -> None:
        self.generic_visit(node)
        self._bind(node.target, self.typed(node.value))

    def visit_Attribute(self, node: ast.Attribute) -> None:
        kind = self.typed(node.value)
        if kind:
            self.uses.append(Use(f"{self.rel}:{node.lineno}", kind, node.attr))
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        if (isinstance(node.func, ast.Name) and node.func.id in ("getattr", "hasattr", "setattr")
                and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant)
                and isinstance(node.args[1].value, str)):
            kind = self.typed(node.args[0])
            if kind:
                self.uses.append(Use(f"{self.rel}:{node.lineno}", kind, node.args[1].value))
        self.generic_visit(node)


def scan(sources: dict[str, str]) -> tuple[list[Use], list[str]]:
    """Every use of a cluster in ``sources`` (rel path -> text), and every cluster held
    untyped."""
    trees = {rel: ast.parse(text, rel) for rel, text in sources.items()}
    fields, untyped = _fields(trees)
    uses: list[Use] = []
    for rel, tree in trees.items():
        s = _Scan(rel, fields)
        s.visit(tree)
        uses += s.uses
        untyped += s.untyped
    return uses, untyped


def undeclared(uses: list[Use]) -> list[str]:
    """The uses of an attribute the protocol a variable is typed against does not declare
    (and, for every cluster whatever its type, ``Cluster`` does not)."""
    declared = {k: _declared(cls) for k, cls in PROTOCOLS.items()}
    return sorted(f"{u.where}: {u.attr} is not declared on {u.protocol}"
                  for u in uses if u.attr not in declared[u.protocol] or u.attr not in declared["Cluster"])


def _nemesis() -> tuple[list[Use], list[str]]:
    return scan({str(p.relative_to(ROOT)): p.read_text() for p in MODULES})


def test_what_the_nemesis_uses_on_a_cluster_is_declared_on_the_protocol():
    uses, _ = _nemesis()
    assert undeclared(uses) == []


def test_every_cluster_the_nemesis_holds_is_typed_against_the_protocol():
    _, untyped = _nemesis()
    assert untyped == []


def test_the_scan_sees_the_nemesis_calls():
    uses, _ = _nemesis()
    used = {u.attr for u in uses}
    # node access, node control, roles and recovery, through every way the nemesis holds one
    # (cluster, self.cluster, ctx.cluster, nem.cluster, c = ...)
    assert {"exec", "gateway", "address", "nodes", "project", "kind", "roles", "role", "brokers",
            "kill", "pause", "running", "wait_rejoined", "seen_before", "node_states",
            "stuck_nodes", "wait_whole", "exited", "close", "absent_targets"} <= used
    # nemesis/net.py's node access is typed the narrow way, and the scan knows it
    narrow = {u.attr for u in uses if u.protocol == "NodeAccess" and u.where.startswith("nemesis/net.py")}
    assert {"exec", "gateway"} <= narrow


def test_the_scan_catches_what_the_protocol_does_not_declare():
    src = '''
from harness.brokers import protocol
from harness.brokers.protocol import Cluster, NodeAccess

class Holder:
    cluster: "Cluster | None"

def f(cluster: Cluster):
    cluster.only_compose_has_this()
    cluster.kill("n")

def g(access: NodeAccess, other: protocol.Cluster):
    access.running("n")            # node control on node access
    access.exec("n", ["true"])
    other.running("n")

def h(nem):
    c = nem.cluster
    c.another_one()
    getattr(nem.cluster, "by_name", None)

def k(cluster, c=None):
    c.whatever()                   # c is not a cluster here
    return lambda n: cluster.nope(n)

class Bare:
    cluster: object
'''
    uses, untyped = scan({"x.py": src})
    assert undeclared(uses) == [
        "x.py:13: running is not declared on NodeAccess",
        "x.py:19: another_one is not declared on Cluster",
        "x.py:20: by_name is not declared on Cluster",
        "x.py:24: nope is not declared on Cluster",
        "x.py:9: only_compose_has_this is not declared on Cluster",
    ]
    assert untyped == ["x.py:27: field 'cluster' is object", "x.py:22: k(cluster) is unannotated"]
