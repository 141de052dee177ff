"""The size rules (no class over 300 lines, no function over 60), held by an AST scan of the
project's code: multi-line string constants (docstrings, SQL) are not counted, since they are
text, not logic. The classes and functions that broke the rules when this test was written (2026-11-28)
were split by issue 53: ``KNOWN`` is empty, and a class or function that breaks a rule fails."""
from __future__ import annotations

import ast
from pathlib import Path

from harness.store import ROOT
from helpers import product_sources

PACKAGES = ("harness", "nemesis", "checkers", "bench")
LIMITS = {"class": 300, "function": 60}
KNOWN: dict[str, int] = {}  # issue 53 split every one; none may come back


def _text_lines(tree: ast.AST) -> set[int]:
    """The lines after the first of every multi-line string constant."""
    return {n for node in ast.walk(tree) if isinstance(node, ast.Constant) and isinstance(node.value, str)
            and node.end_lineno and node.end_lineno > node.lineno
            for n in range(node.lineno + 1, node.end_lineno + 1)}


def sizes(source: str, where: str) -> dict[str, tuple[str, int]]:
    """Every class and function of ``source`` by ``where:name``: its kind and its lines."""
    tree = ast.parse(source)
    text = _text_lines(tree)
    out = {}
    for node in ast.walk(tree):
        if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            kind = "class" if isinstance(node, ast.ClassDef) else "function"
            span = set(range(node.lineno, node.end_lineno + 1)) - text
            out[f"{where}:{node.name}"] = (kind, len(span))
    return out


def over(found: dict[str, tuple[str, int]]) -> dict[str, int]:
    return {name: n for name, (kind, n) in found.items() if n > LIMITS[kind]}


def project_sizes() -> dict[str, tuple[str, int]]:
    """The product's code: a plug-in's own tests (harness/brokers/<broker>/tests/) are left out,
    as tests/ is."""
    out = {}
    for p in product_sources(ROOT, PACKAGES):
        out.update(sizes(p.read_text(), str(p.relative_to(ROOT))))
    return out


def test_no_class_or_function_breaks_the_size_rules_beyond_the_known_ones():
    found = over(project_sizes())
    new = {k: v for k, v in found.items() if k not in KNOWN}
    assert not new, f"over the size rules (class {LIMITS['class']}, function {LIMITS['function']} lines): {new}"
    grown = {k: (KNOWN[k], v) for k, v in found.items() if k in KNOWN and v > KNOWN[k]}
    assert not grown, f"grew past their size when the rule was first held (was, now): {grown}"


def test_the_scan_counts_logic_not_text():
    body = "\n".join(f"    x{i} = {i}" for i in range(61))
    assert over(sizes(f"def f():\n{body}\n", "m.py")) == {"m.py:f": 62}
    sql = '    q = """\n' + "\n".join(f"    SELECT {i}" for i in range(80)) + '\n    """\n    return q\n'
    assert over(sizes(f"def g():\n{sql}", "m.py")) == {}
    cls = "class C:\n" + "\n".join(f"    def m{i}(self):\n        return {i}\n" for i in range(110))
    assert over(sizes(cls, "m.py")) == {"m.py:C": 330}  # 1 + 110 methods of 2 lines, blank lines between
