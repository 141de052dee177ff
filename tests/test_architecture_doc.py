"""docs/architecture.md's claims that a test can hold (issue 35):

(a) its layers are the import-linter layers contract in pyproject.toml, top to bottom, and
    the modules it says are in no layer are exactly those the contract leaves out;
(b) every module path and dotted name it writes exists (a file or directory; a module and its
    attributes);
(c) harness.store owns a run directory's file names: no other module spells one;
(d) the commands exit with harness.verdicts' codes, not with a bare 0 / 1 / 2.

Each check is a function of its inputs, so the tests below also plant a violation and see it
found.
"""
from __future__ import annotations

import ast
import importlib
import pkgutil
import re
import tomllib
from pathlib import Path

import pytest

import harness
from harness import store
from helpers import product_sources

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "architecture.md"
PACKAGES = ("harness", "nemesis", "checkers")


def doc_text() -> str:
    return DOC.read_text(encoding="utf-8")


def section(text: str, title: str) -> str:
    """The body of ``## title`` up to the next ``## `` heading."""
    head = f"\n## {title}\n"
    assert head in text, f"docs/architecture.md has no section '## {title}'"
    return re.split(r"^## ", text.split(head, 1)[1], maxsplit=1, flags=re.M)[0]


# ---- (a) the layers ----------------------------------------------------------------------------
LAYER_ITEM = re.compile(r"^(\d+)\. (.*?) — (.*)$", re.M)


def doc_layers(text: str) -> list[tuple[frozenset[str], bool]]:
    """The numbered list of the Layers section, top to bottom: (the backticked modules before
    the dash, whether the line calls them independent)."""
    items = LAYER_ITEM.findall(section(text, "Layers"))
    assert [int(n) for n, _, _ in items] == list(range(1, len(items) + 1)), "layers numbered 1, 2, ... in order"
    return [(frozenset(re.findall(r"`([\w.]+)`", names)), "independent" in rest) for _, names, rest in items]


def contract_layers(pyproject: str) -> list[tuple[frozenset[str], bool]]:
    """The layers contract's layers, top to bottom: (modules, independent: import-linter's
    ``|``; ``:`` siblings may import each other)."""
    contracts = tomllib.loads(pyproject)["tool"]["importlinter"]["contracts"]
    (layers,) = [c["layers"] for c in contracts if c["type"] == "layers"]
    return [(frozenset(re.split(r"\s*[|:]\s*", layer.strip())), "|" in layer) for layer in layers]


def unlayered(layers: list[tuple[frozenset[str], bool]]) -> set[str]:
    """The harness's top-level modules that no layer holds (import-linter checks none of their
    imports against the layers)."""
    listed = set().union(*(names for names, _ in layers))
    return {f"harness.{m.name}" for m in pkgutil.iter_modules(harness.__path__)} - listed


def doc_unlayered(text: str) -> set[str]:
    """The modules the Layers section names after "In no layer:"."""
    found = re.search(r"^In no layer: (.*?)(?:\n\n|\Z)", section(text, "Layers"), re.M | re.S)
    assert found, "the Layers section says which modules are in no layer ('In no layer: ...')"
    return set(re.findall(r"`(harness\.[\w.]+)`", found[1]))


def test_the_documented_layers_are_the_contract():
    contract = contract_layers((ROOT / "pyproject.toml").read_text())
    assert doc_layers(doc_text()) == contract


def test_the_modules_in_no_layer_are_documented():
    assert doc_unlayered(doc_text()) == unlayered(contract_layers((ROOT / "pyproject.toml").read_text()))


def test_a_layer_out_of_order_or_missing_is_found():
    text = doc_text()
    contract = contract_layers((ROOT / "pyproject.toml").read_text())
    body = section(text, "Layers")
    lines = [m for m in LAYER_ITEM.finditer(body)]

    def planted(new_body: str) -> str:
        return text.replace(body, new_body)
    # the first two layers swapped (their numbers kept)
    one, two = lines[0], lines[1]
    swapped = body.replace(one[0], f"1. {two[2]} — {two[3]}").replace(two[0], f"2. {one[2]} — {one[3]}", 1)
    assert doc_layers(planted(swapped)) != contract
    # a module left out of the bottom layer
    last = lines[-1][0]
    assert doc_layers(planted(body.replace(last, last.replace(f"`{sorted(contract[-1][0])[-1]}`", "")))) != contract
    # a layer whose siblings the contract makes independent, not described so
    indep = next(i for i, (_, independent) in enumerate(contract) if independent)
    line = lines[indep][0]
    assert doc_layers(planted(body.replace(line, line.replace("independent", "related")))) != contract
    with pytest.raises(AssertionError, match="numbered"):
        doc_layers(planted(body.replace("\n2. ", "\n3. ", 1)))
    assert doc_unlayered(planted(body.replace("In no layer: ", "In no layer: `harness.rows`, "))) \
        != unlayered(contract)


# ---- (b) every path and dotted name written exists ------------------------------------------------
FENCE = re.compile(r"^```.*?^```", re.M | re.S)
SPAN = re.compile(r"`([^`]+)`")
PATH = re.compile(r"^(?:harness|checkers|nemesis|compose|docs|tests)/[\w./-]*$")
DOTTED = re.compile(r"(?<![\w./-])((?:harness|checkers|nemesis)(?:\.[A-Za-z_]\w*)+)")
FILE_SUFFIX = re.compile(r"\.(?:jsonl|json|py|md|html|ya?ml|xml|png|sh|txt|j2)$")  # nemesis.jsonl: a file


def written_names(text: str) -> tuple[set[str], set[str]]:
    """(paths, dotted names) the document writes: paths as whole code spans; dotted module
    names anywhere (prose, code spans, the diagrams). A placeholder (``<broker>``) or a glob
    names no one file and is skipped."""
    paths = {s.strip() for s in SPAN.findall(FENCE.sub("", text))
             if PATH.match(s.strip()) and not re.search(r"[<*{]", s)}
    dotted = {m for m in DOTTED.findall(text) if not FILE_SUFFIX.search(m)}
    return paths, dotted


def _attribute(obj, name: str):
    """``obj.name``, or a name a class only declares (a dataclass field without a default, a
    TypedDict key, a Protocol's attribute)."""
    if hasattr(obj, name):
        return getattr(obj, name)
    if isinstance(obj, type) and any(name in vars(k).get("__annotations__", {}) for k in obj.__mro__):
        return None
    raise AttributeError(name)


def resolves(name: str) -> bool:
    """The longest importable prefix of ``name`` is a module of this repository and the rest
    are attributes of it."""
    parts = name.split(".")
    for i in range(len(parts), 0, -1):
        module = ".".join(parts[:i])
        try:
            obj = importlib.import_module(module)
        except ModuleNotFoundError as e:
            if e.name is not None and module.startswith(e.name) and e.name.split(".")[0] in PACKAGES:
                continue  # no such module: try the prefix, the rest may be attributes
            raise
        try:
            for attr in parts[i:]:
                obj = _attribute(obj, attr)
        except AttributeError:
            return False
        return True
    return False


def missing(text: str) -> list[str]:
    paths, dotted = written_names(text)
    return sorted([p for p in paths if not (ROOT / p).exists()] + [d for d in dotted if not resolves(d)])


def test_every_path_and_dotted_name_in_the_doc_exists():
    paths, dotted = written_names(doc_text())
    assert len(paths) > 20 and len(dotted) > 20  # the patterns still find what the document writes
    assert missing(doc_text()) == []


def test_every_path_and_dotted_name_in_the_plugin_checklist_exists():
    text = (ROOT / "docs" / "plugins.md").read_text(encoding="utf-8")
    paths, dotted = written_names(text)
    assert len(paths) > 10 and len(dotted) > 10
    assert missing(text) == []


def test_a_name_that_does_not_exist_is_found():
    text = doc_text()
    planted = text + "\n`harness/nowhere.py`, `checkers/spark/`, `harness.runner.Run.no_such`, " \
                     "harness.judge.no_such() and `nemesis.nowhere`\n"
    assert missing(planted) == ["harness.judge.no_such", "harness.runner.Run.no_such", "harness/nowhere.py",
                                "nemesis.nowhere"]
    assert resolves("harness.context.RunContext.writer")  # a field without a default
    assert resolves("harness.store.RunRecord.status")  # a TypedDict's key
    assert resolves("harness.batch.run_batch") and resolves("checkers.spark.cds")


# ---- (c) the store owns the run directory's file names ----------------------------------------------
# The file names harness.store declares (checked to be there: a renamed constant fails here).
STORE_NAMES = {k: v for k, v in vars(store).items() if k.isupper() and not k.startswith("_") and isinstance(v, str)}
DOCUMENTED_STORE_NAMES = {"RUN_JSON", "CHECK_JSON", "HISTORY", "NEMESIS_LOG", "NEMESIS_STATE", "FINDINGS",
                          "OBSERVATIONS", "LOGS", "REPORT_MD", "REPORT_HTML", "LATEST", "RESULTS_ENV"}
NOT_SCANNED = {
    "harness/store.py": "the owner",
    "nemesis/lazyfs.py": "runs inside the containers on their python3: stdlib (and fusepy) only",
}
# (module, enclosing function, literal): a string equal to a store name that means something else
SAME_WORD = {
    ("harness/brokers/containers.py", "ContainerCluster.logs", "logs"): "the `docker logs` subcommand",
    ("harness/brokers/generations.py", "image_ref", "latest"): "a Docker image tag (<repo>:latest)",
}


def literal_names(source: str, path: str) -> list[tuple[str, str, str, int]]:
    """(path, enclosing function, literal, line) of every string constant in ``source`` equal
    to one of the store's names."""
    values = set(STORE_NAMES.values())
    found: list[tuple[str, str, str, int]] = []

    def visit(node: ast.AST, where: list[str]) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            where = where + [node.name]
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in values:
            found.append((path, ".".join(where), node.value, node.lineno))
        for child in ast.iter_child_nodes(node):
            visit(child, where)
    visit(ast.parse(source, path), [])
    return found


def modules() -> list[tuple[str, str]]:
    """The product's modules (a plug-in's own tests, harness/brokers/<broker>/tests/, are tests)."""
    return [(str(p.relative_to(ROOT)), p.read_text(encoding="utf-8")) for p in product_sources(ROOT, PACKAGES)]


def store_name_copies(sources: list[tuple[str, str]]) -> tuple[list[str], set[tuple]]:
    """(literal copies of a store name outside the store, the exemptions they used)."""
    bad, used = [], set()
    for path, source in sources:
        if path in NOT_SCANNED:
            continue
        for p, where, value, line in literal_names(source, path):
            if (p, where, value) in SAME_WORD:
                used.add((p, where, value))
            else:
                bad.append(f"{p}:{line} ({where or 'module'}): {value!r}: use harness.store's constant")
    return bad, used


def test_the_store_declares_the_documented_names():
    assert DOCUMENTED_STORE_NAMES <= set(STORE_NAMES), sorted(DOCUMENTED_STORE_NAMES - set(STORE_NAMES))
    text = section(doc_text(), "Where each concept lives")
    assert all(f"`{name}`" in text for name in DOCUMENTED_STORE_NAMES - {"RESULTS_ENV"}), \
        "the table names the store's constants"


def test_no_module_but_the_store_spells_a_run_file_name():
    bad, used = store_name_copies(modules())
    assert bad == []
    assert used == set(SAME_WORD), f"exemptions no longer needed: {sorted(set(SAME_WORD) - used)}"


def test_a_copied_file_name_is_found():
    planted = 'from pathlib import Path\n\n\ndef f(d):\n    return Path(d) / "check.json"\n'
    bad, _ = store_name_copies([("harness/planted.py", planted)])
    assert bad == ["harness/planted.py:5 (f): 'check.json': use harness.store's constant"]
    # the same word where an exemption is not: found
    bad, _ = store_name_copies([("harness/brokers/containers.py", 'def collect_logs(d):\n    return d / "logs"\n')])
    assert len(bad) == 1
    assert store_name_copies([("nemesis/lazyfs.py", 'X = "logs"\n')])[0] == []


# ---- (d) exit codes are harness.verdicts' ----------------------------------------------------------------
# (module, enclosing function, code): a bare exit code that is no verdict, and why
NOT_A_VERDICT = {
    ("harness/cli.py", "batch", 0): "--merge / --from-runs / --plan: a summary of stored runs written or a plan "
                                    "printed, nothing judged",
    ("harness/cluster_cli.py", "status", 1): "mqchaos cluster status without a Docker engine: a query, not a verdict",
}


def _is_exit(call: ast.Call) -> bool:
    f = call.func
    return (isinstance(f, ast.Attribute) and f.attr == "exit" and isinstance(f.value, ast.Name)
            and f.value.id == "sys") or (isinstance(f, ast.Name) and f.id in ("exit", "SystemExit"))


def _codes(expr: ast.AST) -> list[int]:
    """The literal exit codes an ``sys.exit`` argument may evaluate to (``2 if bad else 0``)."""
    if isinstance(expr, ast.Constant) and type(expr.value) is int:
        return [expr.value]
    if isinstance(expr, ast.IfExp):
        return _codes(expr.body) + _codes(expr.orelse)
    if isinstance(expr, ast.BoolOp):
        return [c for v in expr.values for c in _codes(v)]
    return []


def bare_exit_codes(sources: list[tuple[str, str]]) -> tuple[list[str], set[tuple]]:
    bad, used = [], set()
    for path, source in sources:
        if not path.startswith("harness/"):
            continue

        def visit(node: ast.AST, where: list[str]) -> None:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                where = where + [node.name]
            if isinstance(node, ast.Call) and _is_exit(node) and node.args:
                for code in _codes(node.args[0]):
                    key = (path, ".".join(where), code)
                    if key in NOT_A_VERDICT:
                        used.add(key)
                    else:
                        bad.append(f"{path}:{node.lineno} ({key[1] or 'module'}): exit {code}: "
                                   "use harness.verdicts' EXIT_VALID / EXIT_INVALID / EXIT_UNKNOWN")
            for child in ast.iter_child_nodes(node):
                visit(child, where)
        visit(ast.parse(source, path), [])
    return bad, used


def test_the_harness_exits_with_the_verdicts_codes():
    bad, used = bare_exit_codes(modules())
    assert bad == []
    assert used == set(NOT_A_VERDICT), f"exemptions no longer needed: {sorted(set(NOT_A_VERDICT) - used)}"


def test_a_bare_exit_code_is_found():
    planted = "import sys\n\n\ndef validate(bad):\n    sys.exit(2 if bad else 0)\n\n\nraise SystemExit(1)\n"
    bad, _ = bare_exit_codes([("harness/planted.py", planted)])
    assert [b.split(": use")[0] for b in bad] == ["harness/planted.py:5 (validate): exit 2",
                                                  "harness/planted.py:5 (validate): exit 0",
                                                  "harness/planted.py:8 (module): exit 1"]
    named = "import sys\nfrom harness.verdicts import EXIT_UNKNOWN\nsys.exit(EXIT_UNKNOWN)\n"
    assert bare_exit_codes([("harness/planted.py", named)])[0] == []
