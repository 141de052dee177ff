"""Run identity (issues 52, 54): what a run tested, as a digest, so that a tally counts
together only the runs of one test.

The digest is the sha256 of the scenario as its model validates it (the broker plug-in's
``harness.spec.BaseScenario`` subclass), dumped canonically: every field that changes what
runs or what is predicted (set-up and cluster, queue / topic, workload, timing, the nemesis
schedule, probes, link, seed, ordering, expect, require), without what changes neither
(``PROSE``: name, id, description, claims, the metadata mode's reason, the row a control is
read against, the figures shown beside the verdict) and without the version, which a tally
keys apart (a matrix runs one file at every version). Fields at their default are left out,
so a field added to the model later does not change every file's digest (the price: a
default changed in the model later goes unseen by the digests recorded before); numbers are
compared by value (``0`` is ``0.0``).
Text the model refuses is no encoding it knows: its digest is ``raw:`` and the sha256 of the
text itself, which never equals a validated one.

A run records its digest in run.json (``digest``, written beside ``params``) and its row
carries it (``harness.results.Row.digest``); a run directory from before has ``params``, from
which ``of_record`` computes it. The published summaries committed before the digest existed
are backfilled once, from the scenario files as they were committed with them:
``python -m harness.identity backfill docs/batches``.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml

from harness import store
from harness.scenario import Scenario, parse, parse_recorded
from harness.spec import Yaml12Loader
from harness.util import entry_point

# Fields that change neither what runs nor what is predicted
PROSE = frozenset({"name", "id", "description", "claims", "measure", "metadata_why", "control_of"})
PREDICTION = frozenset({"expect", "require"})
RAW = "raw:"
SCENARIO_DIR = "scenarios"
SUMMARY_JSON, MATRIX_JSON = "summary.json", "matrix.json"


def _numbers(v: Any) -> Any:
    """``v`` with every integral float written as an int (YAML's ``0`` and ``0.0`` alike)."""
    if isinstance(v, dict):
        return {k: _numbers(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_numbers(x) for x in v]
    if isinstance(v, float) and v.is_integer():
        return int(v)
    return v


def canonical(sc: Scenario, prediction: bool = True) -> dict:
    """The scenario's fields that make the test, at their non-default values; without
    ``prediction`` the set-up alone (two files of one set-up predicting different things)."""
    data = sc.model_dump(mode="json", exclude_defaults=True)
    drop = PROSE | {"version"} | (set() if prediction else PREDICTION)
    data = {k: v for k, v in data.items() if k not in drop}
    if isinstance(data.get("cluster"), dict):  # the version the run used: keyed apart
        data["cluster"] = {k: v for k, v in data["cluster"].items() if k != "version"}
    return _numbers(data)


def digest_of(data: Any) -> str:
    """The sha256 of ``data`` as canonical JSON (sorted keys, no spaces)."""
    text = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def digest(sc: Scenario, prediction: bool = True) -> str:
    """What a run of ``sc`` tests: the one definition (see the module's doc)."""
    return digest_of(canonical(sc, prediction))


def raw_digest(text: str | bytes) -> str:
    """The digest of text the model refuses: never equal to a validated scenario's."""
    return RAW + hashlib.sha256(text.encode() if isinstance(text, str) else text).hexdigest()


def short(d: str | None) -> str:
    """A digest as tables show it."""
    if not d:
        return "-"
    return RAW + d[len(RAW):][:8] if d.startswith(RAW) else d[:12]


def stamp(sc: Scenario) -> dict[str, str]:
    """A row's identity for a run of ``sc``: what it tested (``digest``) and its set-up alone
    (``setup_digest``: a claim's line shows the runs of its set-up under another prediction)."""
    return {"digest": digest(sc), "setup_digest": digest(sc, prediction=False)}


def stamp_text(text: str, source: str = "scenario") -> dict[str, str]:
    """``stamp`` of a scenario file's text; text the model refuses is its own set-up too."""
    d, sc = of_text(text, source)
    return stamp(sc) if sc is not None else {"digest": d, "setup_digest": d}


def of_params(params: Any) -> str:
    """The digest of a run from its run.json ``params`` (the scenario as run)."""
    try:
        return digest(parse_recorded(params))
    except (ValueError, TypeError):
        return raw_digest(json.dumps(params, sort_keys=True, default=str))


def of_record(info: dict) -> str | None:
    """A run's digest from its run.json: the one it recorded, else from its ``params``."""
    if info.get("digest"):
        return info["digest"]
    return of_params(info["params"]) if isinstance(info.get("params"), dict) else None


def of_text(text: str, source: str = "scenario") -> tuple[str, Scenario | None]:
    """The digest of a scenario file's text (validated with today's model, at its own version)
    and the scenario, or ``raw:`` and None when the model refuses it."""
    try:
        sc = parse(yaml.load(text, Loader=Yaml12Loader), source, env={})  # noqa: S506 - a safe loader
    except (ValueError, TypeError, yaml.YAMLError):  # ScenarioError is a ValueError
        return raw_digest(text), None
    return digest(sc), sc


# ---- the catalogue: what each file tests today ----------------------------------------------

@dataclass(frozen=True)
class Entry:
    """A file of the catalogue: its name, id, what it tests now (``digest``), its set-up alone
    (``setup``: None for a comparison), its prediction (``expect``) and the seed claims it
    asserts (``claims``)."""
    name: str
    id: str | None
    digest: str
    setup: str | None = None
    expect: dict = field(default_factory=dict)
    claims: tuple[int, ...] = ()


class Catalogue:
    """The files' present digests: which test a row's run belongs to, or that none does now."""

    def __init__(self, entries: list[Entry]):
        self.entries = list(entries)
        self.by_name = {e.name: e for e in self.entries}
        self.by_id = {e.id: e for e in self.entries if e.id}
        self.by_digest: dict[str, list[Entry]] = {}
        for e in self.entries:
            self.by_digest.setdefault(e.digest, []).append(e)

    def with_entries(self, more: list[Entry]) -> Catalogue:
        return Catalogue([*self.entries, *more])

    def id_of(self, row: dict) -> str | None:
        """A row's id: its file's present one, found by the scenario's name (old rows carry ids
        since given to other files), else by its digest (a file renamed or folded into another
        of the same test), else the one it recorded."""
        e = self.by_name.get(row.get("scenario"))
        files = self.files_of(row.get("digest"))
        return e.id if e is not None else files[0].id if len(files) == 1 else row.get("id")

    def files_of(self, d: str | None) -> list[Entry]:
        """The files whose present test is ``d`` (several when two files test one thing)."""
        return self.by_digest.get(d, []) if d else []

    def superseded(self, row: dict) -> bool:
        """A row (a run) whose digest no file of the catalogue tests now: an older encoding, a
        file since removed, or a run with no digest at all."""
        return not self.files_of(row.get("digest"))


def entry(path: Path) -> Entry:
    """A scenario file's entry; one the model refuses has its text's digest."""
    text = path.read_text(encoding="utf-8")
    d, sc = of_text(text, str(path))
    if sc is None:
        try:
            data = yaml.load(text, Loader=Yaml12Loader)  # noqa: S506 - a safe loader
        except yaml.YAMLError:
            data = None
        data = data if isinstance(data, dict) else {}
        return Entry(str(data.get("name") or path.stem), data.get("id"), d)
    return Entry(sc.name, sc.id, d, digest(sc, prediction=False), dict(sc.expect), tuple(sc.claims))


@lru_cache(maxsize=4)
def _catalogue(files: tuple[tuple[str, int, int], ...]) -> Catalogue:
    return Catalogue([entry(Path(p)) for p, _, _ in files])


def catalogue(root: Path | None = None) -> Catalogue:
    """Every scenario file's present digest (``scenarios/*.yaml`` below ``root``, the
    repository by default), loaded again only when a file changed."""
    paths = sorted(Path(root or store.ROOT).joinpath(SCENARIO_DIR).glob("*.yaml"))
    return _catalogue(tuple((str(p), p.stat().st_mtime_ns, p.stat().st_size) for p in paths))


# ---- the backfill of summaries published before the digest -----------------------------------

def _git(repo: Path, *args: str) -> str | None:
    """A git command's output in ``repo``; None when it fails (a path absent at that commit)."""
    res = subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True)
    return res.stdout if res.returncode == 0 else None


def first_commit(path: Path, repo: Path) -> str | None:
    """The commit that first added ``path`` (the oldest, should it have been added twice)."""
    out = (_git(repo, "log", "--diff-filter=A", "--format=%H", "--", str(path.resolve().relative_to(repo))) or "")
    shas = out.split()
    return shas[-1] if shas else None


def committed_file(repo: Path, sha: str, scenario: str) -> tuple[str, str] | None:
    """(path, text) of the scenario file named ``scenario`` as it was at ``sha``: by its file
    name, else the file whose ``name:`` it is, else (an invalid file's row) the path itself."""
    for path in (f"{SCENARIO_DIR}/{scenario}.yaml", scenario):
        text = _git(repo, "show", f"{sha}:{path}")
        if text is not None:
            return path, text
    listing = _git(repo, "ls-tree", "--name-only", sha, f"{SCENARIO_DIR}/") or ""
    for path in (p for p in listing.split() if p.endswith(".yaml")):
        text = _git(repo, "show", f"{sha}:{path}") or ""
        if any(line.strip() in (f"name: {scenario}", f'name: "{scenario}"') for line in text.splitlines()):
            return path, text
    return None


def _dump_like(data: Any, original: str) -> str:
    """``data`` serialised as ``original`` was (one row a line, or indented by one; ASCII
    escapes or not): a backfilled file differs from its original by the added keys alone."""
    dumps = [lambda x, a=a: "[\n" + ",\n".join(json.dumps(i, separators=(",", ":"), ensure_ascii=a, default=str)
                                               for i in x) + "\n]\n" for a in (True, False)]
    dumps += [lambda x, a=a: json.dumps(x, indent=1, ensure_ascii=a, default=str) + "\n" for a in (True, False)]
    for dump in dumps:
        if dump(json.loads(original)) == original:
            return dump(data)
    raise ValueError("its serialisation is none the harness writes: not rewritten")


def _stamp(row: dict, scenario: str | None, sha: str, repo: Path, cache: dict) -> bool:
    """Add ``digest``, ``setup_digest`` and ``digest_from`` to a row without a digest (True
    when added)."""
    if row.get("digest") or not scenario:
        return False
    if (sha, scenario) not in cache:
        found = committed_file(repo, sha, scenario)
        cache[sha, scenario] = None if found is None else {**stamp_text(found[1], found[0]),
                                                           "digest_from": f"git {sha}:{found[0]}"}
    if cache[sha, scenario] is None:
        return False
    row.update(cache[sha, scenario])
    return True


def backfill_file(path: Path, repo: Path, cache: dict) -> tuple[int, int]:
    """A published summary.json (a list of rows) or matrix.json (each cell's runs) given the
    digests of the scenario files committed with it: (rows stamped, rows left without one)."""
    sha = first_commit(path, repo)
    if sha is None:
        raise ValueError(f"{path}: never committed: its rows are stamped when they run")
    original = path.read_text()
    data = json.loads(original)
    if path.name == MATRIX_JSON:  # each cell's runs, by their table row's scenario
        runs = [(r, row["scenario"]) for t in data["tables"] for row in t["rows"]
                for c in row["cells"].values() for r in c["runs"]]
    else:
        runs = [(r, r.get("scenario")) for r in data]
    stamped = sum(_stamp(r, name, sha, repo, cache) for r, name in runs)
    if stamped:
        path.write_text(_dump_like(data, original))
    return stamped, sum(1 for r, _ in runs if not r.get("digest"))


def backfill(batches: Path, repo: Path | None = None) -> list[str]:
    """Every published summary.json and matrix.json below ``batches`` backfilled; one line per
    file changed or with rows left without a digest."""
    repo = Path(repo or store.ROOT).resolve()
    cache: dict = {}
    out = []
    for path in sorted([*Path(batches).glob(f"*/{SUMMARY_JSON}"), *Path(batches).glob(f"*/{MATRIX_JSON}")]):
        stamped, left = backfill_file(path, repo, cache)
        if stamped or left:
            out.append(f"{path}: {stamped} row(s) stamped" + (f", {left} with no scenario file found" if left else ""))
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m harness.identity", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    b = sub.add_parser("backfill", help="stamp published rows without a digest (see the module's doc)")
    b.add_argument("batches", type=Path, help="the published batches (docs/batches)")
    d = sub.add_parser("digest", help="print the digest of scenario files")
    d.add_argument("files", nargs="+", type=Path)
    args = p.parse_args(argv)
    if args.command == "backfill":
        for line in backfill(args.batches):
            print(line)
        return 0
    for f in args.files:
        print(f"{of_text(f.read_text(encoding='utf-8'), str(f))[0]}  {f}")
    return 0


if __name__ == "__main__":
    with entry_point():
        sys.exit(main())
