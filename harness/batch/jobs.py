"""A batch's jobs: which scenarios run (``select``: files, --only, and in a matrix each
scenario once per version), how many times, in what order (``plan``, ``interleave``), and
the files or versions that did not load (``Bad``). Nothing here runs anything: a plan
(``mqchaos batch --plan``) reads only this.

``plan`` puts first the runs whose claim the version lacks (not applicable: no cluster), then
``interleave``s the rest so that consecutive runs use different brokers wherever possible
(one compose project per broker: the same broker's next run comes up once the previous one is
down). In a matrix each file is loaded once per version of its broker (``--version``, which
overrides the scenario's ``version:``: the one rule, harness.brokers.generations); a version
that refuses the file at load time is a ``Bad`` (a "refused at load" row, status
``refused``)."""
from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import NamedTuple

from harness import rows as R
from harness.batch import shard as shards
from harness.scenario import Scenario, ScenarioError, load, parse, read

SCENARIO_DIR = Path(__file__).resolve().parents[2] / "scenarios"

# a row's variant letters (a-h) and a KRaft counterpart's k: K7bk is a variant of K7
VARIANT = re.compile(r"[a-h]*k?$")


class Bad(NamedTuple):
    """A scenario file that did not load: as a whole (an invalid file), or at one version of
    a matrix while it names its scenario (refused at that version: ``scenario`` ... set)."""
    path: str
    error: str
    scenario: str | None = None
    id: str | None = None
    broker: str | None = None
    version: str | None = None

    @property
    def reason(self) -> str:
        """The error without the line naming the file (a refusal names its scenario)."""
        return self.error if self.scenario is None else self.error.split("\n", 1)[-1].strip()


Versions = dict[str, str] | dict[str, list[str]]


def select(files: list[Path], only: list[str] | None, sort: bool = True,
           versions: Versions | None = None) -> tuple[list[Scenario], list[Bad]]:
    """Scenarios to run, in catalogue order (R, Q, K; then by id), and the files that did not
    validate (each with its error). `only` matches ids (R5 picks R5 and R5b) or names.
    ``versions``, by broker: one version (--version) or a list (a matrix, ``mqchaos matrix
    --versions``): then each file is loaded once per version of its broker, those versions
    overriding its own ``version:`` (the one rule), in the order given; one that refuses it
    at load time is a ``Bad`` naming the scenario and the version."""
    scenarios: list[Scenario] = []
    bad: list[Bad] = []
    for f in files:
        if versions and any(isinstance(v, list) for v in versions.values()):
            _load_each_version(f, versions, scenarios, bad)
            continue
        try:
            scenarios.append(load(f, versions))
        except ScenarioError as e:
            bad.append(Bad(str(f), str(e)))
    if only:
        want = [o.strip() for o in only if o.strip()]
        scenarios = [s for s in scenarios if wanted(s.name, s.id, want)]
        # a file that did not load is reported only if selected; one that did not load at all
        # by its file name, which starts with its id (Q6a on 4.3 is no error of a batch of R rows)
        bad = [b for b in bad if (wanted(b.scenario, b.id, want) if b.scenario is not None
                                  else wanted(Path(b.path).stem, Path(b.path).stem.split("-")[0], want))]
    return (sorted(scenarios, key=order_key) if sort else scenarios), bad


def _load_each_version(f: Path, versions: Versions, scenarios: list[Scenario], bad: list[Bad]) -> None:
    try:
        data = read(f)
    except ScenarioError as e:
        bad.append(Bad(str(f), str(e)))
        return
    broker = data.get("broker") if isinstance(data, dict) else None
    chosen = versions.get(broker) if isinstance(broker, str) else None
    if not isinstance(chosen, list):  # a broker the matrix does not vary: the usual rule
        try:
            scenarios.append(parse(data, str(f), version=versions if chosen else None))
        except ScenarioError as e:
            bad.append(Bad(str(f), str(e)))
        return
    for v in chosen:
        try:
            scenarios.append(parse(copy.deepcopy(data), str(f), version={broker: v}))
        except ScenarioError as e:
            sid = data.get("id")
            bad.append(Bad(str(f), str(e), str(data.get("name") or Path(f).stem),
                           None if sid is None else str(sid), broker, v))


def wanted(name: str, sid: str | None, want: list[str]) -> bool:
    """Whether --only's ``want`` picks the scenario: by id (R5 picks R5 and R5b; K7 the KRaft
    counterparts K7k and K7bk too, since every file has its own id) or name."""
    return any(name == w or (sid or "") == w or name.startswith(w + "-")
               or VARIANT.sub("", sid or "") == w for w in want)


def order_key(sc: Scenario) -> tuple:
    return R.catalogue_order(sc.id, sc.name)


def interleave(jobs: list, kind=lambda job: job[0].broker) -> list:
    """``jobs`` reordered so that consecutive jobs are of different kinds wherever possible
    (each kind's own order kept; the kind with most left goes next): then each next cluster
    can come up while the previous run ends."""
    queues: dict = {}
    for pos, job in enumerate(jobs):
        queues.setdefault(kind(job), []).append((pos, job))
    out, prev = [], None
    while any(queues.values()):
        left = [k for k, q in queues.items() if q]
        choice = [k for k in left if k != prev] or left
        prev = max(choice, key=lambda k: (len(queues[k]), -queues[k][0][0]))
        out.append(queues[prev].pop(0)[1])
    return out


def plan(only: list[str] | None = None, repeat: int = 1, files: list[Path] | None = None, sort: bool = True,
         versions: Versions | None = None, shard: tuple[int, int] | None = None
         ) -> tuple[list[tuple[Scenario, int, int]], list[Bad]]:
    """A batch's jobs, (scenario, repeat, position in the table), in the order they run, and
    the files that did not load (``select``'s arguments). Jobs whose claim the version lacks
    go first (no cluster: they only write their directory); the rest are ``interleave``d by
    broker. The table's order (position): by repeat, then scenario, then version. ``shard``
    (I, N): only the scenarios of shard I (harness.batch.shard; a file that did not load is
    shard 1's to report)."""
    scenarios, invalid = select(files or sorted(SCENARIO_DIR.glob("*.yaml")), only, sort, versions)
    if shard is not None:
        keep = set(shards.pick(list(dict.fromkeys(sc.name for sc in scenarios)), shard))
        scenarios = [sc for sc in scenarios if sc.name in keep]
        invalid = invalid if shard[0] == 1 else []
    jobs = [(sc, rep, pos) for pos, (rep, sc) in enumerate((rep, sc) for rep in range(repeat) for sc in scenarios)]
    instant = [j for j in jobs if j[0].not_applicable()]
    return instant + interleave([j for j in jobs if not j[0].not_applicable()]), invalid
