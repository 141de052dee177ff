"""The shape of the code (docs/architecture.md): the import layering, no import cycles, no
broker named outside its plug-in, and the one rule that merges verdicts."""
from __future__ import annotations

import ast
import itertools
import subprocess
import sys
from pathlib import Path

import grimp
import pytest

from harness import brokers
from harness.verdicts import EXIT_INVALID, EXIT_UNKNOWN, EXIT_VALID, exit_code, merge, merge_codes

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("harness", "nemesis", "checkers")


def test_import_contracts_hold():
    """lint-imports checks the contracts in pyproject.toml (layers, the checkers reading
    runs only through the store, the plug-ins independent and reached only by name)."""
    proc = subprocess.run([str(Path(sys.executable).parent / "lint-imports"), "--no-cache"], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert "0 broken" in proc.stdout


def _cycles(graph) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on, stack, out = set(), [], []
    for root in sorted(graph.modules):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.find_modules_directly_imported_by(root))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph.find_modules_directly_imported_by(w)))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def test_no_import_cycles():
    graph = grimp.build_graph(*PACKAGES, cache_dir=None)  # every import, inside functions too
    assert _cycles(graph) == []


def test_the_cycle_finder_finds_a_cycle():
    class G:  # a → b → c → a, and d alone
        modules = {"a", "b", "c", "d"}
        edges = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}

        def find_modules_directly_imported_by(self, m):
            return self.edges[m]
    assert _cycles(G()) == [["a", "b", "c"]]


def _broker_names_outside_plugins() -> list[str]:
    names = set(brokers.KINDS)
    found = []
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            rel = path.relative_to(ROOT)
            if rel.parts[:2] == ("harness", "brokers"):
                continue
            for node in ast.walk(ast.parse(path.read_text(), str(rel))):
                if isinstance(node, ast.Constant) and node.value in names:
                    found.append(f"{rel}:{node.lineno}: {node.value!r}")
    return found


def test_no_module_outside_the_plugins_names_a_broker():
    assert _broker_names_outside_plugins() == []


# ---- the merge rule, against an independent reference --------------------------------------

def _reference(verdicts):
    """Jepsen's rule, spelled out: false wins, then unknown, then true."""
    if False in verdicts:
        return False
    if any(v is None for v in verdicts):
        return None
    return True


@pytest.mark.parametrize("n", range(0, 4))
def test_merge_agrees_with_the_reference(n):
    for combo in itertools.product([True, False, None], repeat=n):
        assert merge(combo) is _reference(list(combo)), combo
        codes = [exit_code(v) for v in combo]
        assert merge_codes(codes) == exit_code(_reference(list(combo))), combo


def test_exit_codes():
    assert (exit_code(True), exit_code(False), exit_code(None)) == (EXIT_VALID, EXIT_INVALID, EXIT_UNKNOWN)
    assert merge_codes([EXIT_VALID, EXIT_UNKNOWN]) == EXIT_UNKNOWN
    assert merge_codes([EXIT_UNKNOWN, EXIT_INVALID, EXIT_VALID]) == EXIT_INVALID
    assert merge_codes([]) == EXIT_VALID
