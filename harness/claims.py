"""The seed claims, read from the repository's own copy (issue 54): the 76 numbered items of
docs/sources/SEED-CLAIMS.md, each a claim of one seed text (docs/sources/seeds/*.txt) quoted in
its own language, parsed into an index: number -> its seed, the section and line of
SEED-CLAIMS.md that hold it, its words, the place in the seed the item names ("Ignore",
"Scenario 4", "Same paragraph": as the item gives it, a "Same ..." read as the place of the
item before it that names one), and each quote with the seed and line where its words stand.

docs/sources/ is vendored from ``../shared`` (beside the repository in CI, absent from a fresh
clone): the copies are equal to the originals while both exist (tests/test_atlas.py). Nothing
is typed here by hand: the index is parsed again from the file (``claims()``).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from harness import store

SOURCES = store.ROOT / "docs" / "sources"  # the vendored copies of ../shared
SEED_CLAIMS_MD = SOURCES / "SEED-CLAIMS.md"
SCENARIOS_MD = SOURCES / "SCENARIOS.md"
SEEDS = SOURCES / "seeds"
VENDORED = ("SEED-CLAIMS.md", "SCENARIOS.md", "seeds")  # what docs/sources holds of ../shared
SHARED = store.ROOT.parent / "shared"  # the originals, where a checkout has them beside it

SECTION = re.compile(r"^### (?P<seed>\S+\.txt) \((?P<topic>.*)\)\s*$")
ITEM = re.compile(r"^(?P<n>\d+)\. (?P<text>.*\S)\s*$")
# a quote: "..." opened after a space, a bracket or a colon, closed before a space or a
# punctuation mark (a quote may hold quotes: item 33's "consumer cancellation notification")
QUOTE = re.compile(r'(?:^|(?<=[\s(:]))"(?P<q>.+?)"(?=[\s.,;:)]|$)')
TAG = re.compile(r"\*\*\[(?P<tag>[^\]]+)\]")
ELISION = re.compile(r"…|\.\.\.| / ")  # where a quote leaves words of the seed out
SAME = "Same"  # "Same paragraph", "Same section", "Same": the place of the item before
PLACE_MAX = 70  # a place is a short label before the item's first colon


@dataclass(frozen=True)
class Quote:
    """Words an item quotes, and where they stand: the seed file and its line (None when the
    words are not the seed's own, e.g. a paraphrase in quotation marks)."""
    text: str
    seed: str | None
    line: int | None


@dataclass(frozen=True)
class Claim:
    """One item of SEED-CLAIMS.md."""
    number: int
    seed: str  # the seed file its section names: "000_4902259dd42b22eb.txt"
    topic: str  # the section's words for the seed: "RabbitMQ mirrored queues and partitions"
    line: int  # its line in SEED-CLAIMS.md
    text: str  # the item as written, after its number
    place: str | None  # the seed's place as the item names it, when it does
    same_as: int | None  # for a "Same ..." place: the item before whose place it is
    quotes: tuple[Quote, ...]
    tags: tuple[str, ...]  # "contradicted, unasserted", "partial", ...

    @property
    def seed_id(self) -> str:
        """The seed's number: "000"."""
        return self.seed[:3]

    @property
    def seed_line(self) -> int | None:
        """The line of the seed where the item's first quote of its own seed stands."""
        return next((q.line for q in self.quotes if q.seed == self.seed and q.line), None)


def _place(text: str) -> str | None:
    """The label before an item's first colon ("Ignore", "Scenario 4"), when it is one: short,
    no tag, no sentence or quote ending in it."""
    if ":" not in text:
        return None
    head = text.split(":", 1)[0].strip()
    if not head or len(head) > PLACE_MAX or "**" in head or '". ' in head or head.endswith('"'):
        return None
    return head


def _squeezed(text: str) -> tuple[str, list[int]]:
    """``text`` without whitespace, and for each of its characters the line it stood on."""
    chars, lines, line = [], [], 1
    for ch in text:
        if ch == "\n":
            line += 1
        if not ch.isspace():
            chars.append(ch)
            lines.append(line)
    return "".join(chars), lines


@lru_cache(maxsize=1)
def _seed_texts(seeds: Path) -> dict[str, tuple[str, list[int]]]:
    return {p.name: _squeezed(p.read_text(encoding="utf-8")) for p in sorted(seeds.glob("*.txt"))}


def locate(words: str, first: str, seeds: Path = SEEDS) -> tuple[str | None, int | None]:
    """The seed file and line where ``words`` stand (their longest run between elisions,
    whitespace ignored), looked for in ``first`` before the other seeds; (None, None) when in
    none."""
    texts = _seed_texts(seeds)
    run = max(ELISION.split(words), key=lambda s: len(_squeezed(s)[0]))
    needle = _squeezed(run)[0]
    if len(needle) < 2:
        return None, None
    for name in sorted(texts, key=lambda s: s != first):
        text, lines = texts[name]
        at = text.find(needle)
        if at >= 0:
            return name, lines[at]
    return None, None


def parse(text: str, seeds: Path = SEEDS) -> list[Claim]:
    """Every numbered item of SEED-CLAIMS.md's text, in the file's order; ValueError for an
    item outside a seed's section."""
    out: list[Claim] = []
    seed = topic = None
    last_place: int | None = None  # the last item that named its place
    for n, line in enumerate(text.splitlines(), 1):
        if (m := SECTION.match(line)):
            seed, topic, last_place = m["seed"], m["topic"], None
            continue
        if not (m := ITEM.match(line)):
            continue
        if seed is None:
            raise ValueError(f"SEED-CLAIMS.md:{n}: item {m['n']} stands under no seed's section")
        body = m["text"]
        place = _place(body)
        same_as = last_place if place and place.split()[0] == SAME else None
        if place and same_as is None:
            last_place = int(m["n"])
        rest = body.split(":", 1)[1] if place else body  # a place's own quotes ("nodes") are no claim
        quotes = tuple(Quote(q, *locate(q, seed, seeds)) for q in (x["q"] for x in QUOTE.finditer(rest)))
        out.append(Claim(int(m["n"]), seed, topic, n, body, place, same_as, quotes,
                         tuple(t["tag"] for t in TAG.finditer(body))))
    return out


@lru_cache(maxsize=1)
def _claims(path: Path, seeds: Path) -> tuple[Claim, ...]:
    return tuple(parse(path.read_text(encoding="utf-8"), seeds))


def claims(path: Path = SEED_CLAIMS_MD, seeds: Path = SEEDS) -> tuple[Claim, ...]:
    """The claims of the vendored SEED-CLAIMS.md (parsed once)."""
    return _claims(Path(path), Path(seeds))


def claim(n: int) -> Claim:
    """Item ``n`` of SEED-CLAIMS.md; KeyError when there is none."""
    found = {c.number: c for c in claims()}
    if n not in found:
        raise KeyError(f"no item {n} in {SEED_CLAIMS_MD.name} (1 to {len(found)})")
    return found[n]


def place_text(c: Claim, index: dict[int, Claim] | None = None) -> str | None:
    """Where in its seed a claim stands, in words: its place ("Same section" with the place of
    the item it follows), and the seed's line where its quote stands."""
    index = index if index is not None else {x.number: x for x in claims()}
    words = c.place
    if c.same_as is not None and c.same_as in index:
        words = f"{c.place} as claim {c.same_as} ({index[c.same_as].place})"
    line = f"line {c.seed_line}" if c.seed_line else None
    return ", ".join(x for x in (words, line) if x) or None


def vendored_differences(shared: Path = SHARED, sources: Path = SOURCES) -> list[str]:
    """The files of ``shared`` (../shared) that docs/sources copies and whose copy differs or
    is missing; the copy's own extra files too. Empty when they agree."""
    out = []
    for name in VENDORED:
        orig, copy = shared / name, sources / name
        pairs = ([(p, copy / p.name) for p in sorted(orig.glob("*.txt"))] if orig.is_dir() else [(orig, copy)])
        if orig.is_dir():
            extra = {p.name for p in copy.glob("*.txt")} - {p.name for p in orig.glob("*.txt")}
            out += [f"{copy / x}: not in {orig}" for x in sorted(extra)]
        out += [f"{c}: differs from {o}" for o, c in pairs if not c.is_file() or c.read_bytes() != o.read_bytes()]
    return out
