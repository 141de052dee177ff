"""Claims about two rows at once (seed 000: "if the publisher can only drop the message,
improving availability also improves data safety" is R2 against R3): a comparison file
(``scenarios/comparisons/*.yaml``) names its sides by row id, the figure taken of each side's
run (a sum of row columns or measurements) and the relation predicted between them.

A comparison runs nothing of its own: it is judged over published batches (docs/batches),
pairing the sides' runs of one batch and one broker version in the order they ran. A pair
counts only when each side's run decided its own row (held or did not hold): a run whose fault
did not take effect measured nothing the comparison may use. Each pair is one sample; the
tally says held k of n like any row's.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml
from pydantic import Field, ValidationError, ValidationInfo, field_validator

from harness import identity, store
from harness.expect import OPS
from harness.spec import SEED_CLAIMS, Strict, read_yaml

COMPARISON_FILES = "scenarios/comparisons/*.yaml"  # from the repository's root
# "<side> [* factor] <op> <side>": "batched * 2 < one_by_one" (seed 001: batching makes a
# synchronisation "very considerably" faster, read as at least twice as fast)
RELATION = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]*)\s*(?:\*\s*([0-9]+(?:\.[0-9]+)?)\s*)?"
                      r"(>=|<=|==|!=|>|<)\s*([A-Za-z_][A-Za-z0-9_]*)\s*$")


class ComparisonError(ValueError):
    """A comparison file that cannot be read or validated; the message names the field."""


class Comparison(Strict):
    name: str
    id: str
    description: str
    claims: list[int] = Field(min_length=1)
    sides: dict[str, str] = Field(min_length=2, max_length=2)  # label -> row id
    figure: list[str] = Field(min_length=1)  # summed per side: row columns or measurements
    expect: str  # "<side> [* factor] <op> <side>"

    @field_validator("claims")
    @classmethod
    def _claims(cls, v: list[int]) -> list[int]:
        bad = [c for c in v if not 1 <= c <= SEED_CLAIMS]
        if bad:
            raise ValueError(f"{bad} are no item of docs/sources/SEED-CLAIMS.md (1 to {SEED_CLAIMS})")
        return v

    @field_validator("expect")
    @classmethod
    def _relation(cls, v: str, info: ValidationInfo) -> str:
        m = RELATION.match(v)
        if not m:
            raise ValueError(f"{v!r} is not '<side> [* factor] <op> <side>' (op one of {', '.join(OPS)})")
        sides = info.data.get("sides") or {}
        if {m.group(1), m.group(4)} - set(sides) or m.group(1) == m.group(4):
            raise ValueError(f"must relate the two sides ({', '.join(sides)}), not {v!r}")
        return v

    def relation(self) -> tuple[str, float, str, str]:
        """(left side, its factor, operator, right side)."""
        m = RELATION.match(self.expect)
        return m.group(1), float(m.group(2) or 1), m.group(3), m.group(4)

    def prediction(self) -> dict:
        """What the claim table groups this comparison's samples by."""
        return {"compare": self.expect, "figure": " + ".join(self.figure),
                **{side: row for side, row in self.sides.items()}}


def parse(data: Any, source: str) -> Comparison:
    try:
        return Comparison.model_validate(data)
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(x) for x in first["loc"]) or "(top level)"
        raise ComparisonError(f"{source}: {where}: {first['msg']}") from None


def load(path: str | Path) -> Comparison:
    try:
        data = read_yaml(path)
    except OSError as e:
        raise ComparisonError(f"{path}: cannot read: {e.strerror}") from None
    except yaml.YAMLError as e:
        raise ComparisonError(f"{path}: not valid YAML: {e}") from None
    return parse(data, str(path))


def load_all(root: Path | None = None) -> list[Comparison]:
    return [load(p) for p in sorted((root or store.ROOT).glob(COMPARISON_FILES))]


def unknown_rows(c: Comparison, row_ids: set[str]) -> list[str]:
    """The sides naming no row of the catalogue (refused before anything is judged)."""
    return [f"sides.{side}: no scenario has id {rid}" for side, rid in c.sides.items() if rid not in row_ids]


def digest(c: Comparison, tests: dict[str, str | None]) -> str:
    """What a comparison tests: its relation and figure over its sides' tests (``tests``: each
    side's digest, harness.identity; the files' present ones for the comparison itself, the two
    runs' for a sample). A sample of a side's older encoding is superseded like a run."""
    return identity.digest_of({"expect": c.expect, "figure": c.figure, "sides": c.sides, "tests": tests})


def entry(c: Comparison, cat: identity.Catalogue) -> identity.Entry:
    """The comparison in the catalogue: its present test over its sides' present files."""
    return identity.Entry(c.name, c.id, digest(c, {side: getattr(cat.by_id.get(rid), "digest", None)
                                                   for side, rid in c.sides.items()}), claims=tuple(c.claims))


def figure(c: Comparison, row: dict) -> float | None:
    """The comparison's figure of one run's row; None when a term was not measured."""
    total = 0.0
    for name in c.figure:
        v = row.get(name, (row.get("measurement") or {}).get(name))
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            return None
        total += v
    return int(total) if total == int(total) else round(total, 6)


def pairs(c: Comparison, batches: list[tuple[str, list[dict]]], cat: identity.Catalogue) -> list[dict]:
    """Each sample of ``c``: per batch and version, the i-th decided run of one side with the
    i-th of the other, the figure of each, whether the relation held and what it tested
    (``digest``). A run's side is its file's present id (``cat``: old rows carry ids since
    given to other files)."""
    left, factor, op, right = c.relation()
    label = {rid: side for side, rid in c.sides.items()}
    out = []
    for batch, rows in batches:
        runs: dict[tuple[str | None, str], list[dict]] = {}
        for r in rows:
            side = label.get(cat.id_of(r))
            if side is not None and r.get("prediction") in (True, False):  # decided its own row
                runs.setdefault((None if r.get("version") is None else str(r["version"]), side), []).append(r)
        for version in sorted({v for v, _ in runs}, key=lambda v: v or ""):
            for a, b in zip(runs.get((version, left), []), runs.get((version, right), [])):
                values = {left: figure(c, a), right: figure(c, b)}
                held = None if None in values.values() else OPS[op](values[left] * factor, values[right])
                out.append({"id": c.id, "scenario": c.name, "version": version, "batch": batch,
                            "values": values, "held": held, "runs": [a.get("run"), b.get("run")],
                            "digest": digest(c, {left: a.get("digest"), right: b.get("digest")})})
    return out


def sample_rows(c: Comparison, samples: list[dict]) -> list[dict]:
    """The samples as rows the tally counts (harness.rows.tally): one per pair of runs."""
    return [{"id": c.id, "scenario": c.name, "version": s["version"], "expect": c.prediction(), "require": {},
             "prediction": s["held"], "run": "+".join(str(x) for x in s["runs"]), "digest": s["digest"]}
            for s in samples]
