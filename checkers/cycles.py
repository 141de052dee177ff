"""Dependency cycles between committed transactions, and exactly-once processing.

A consume-transform-produce history (harness/brokers/kafka/txn.py) has transactions that
read as well as write: a processor's reads carry the transaction they were made in
(``txn`` on a delivery) and its outputs the input they came from (``from_msg``). With the
offsets of every committed write and read, the transactions' dependency graph is Adya's,
as Jepsen's Kafka checker derives it from a log:

  ww  T1 -> T2  T2's committed write is the next one after T1's in a partition (offset
                order: the partition's version order; successive writes suffice, the
                rest follow by transitivity)
  wr  T1 -> T2  committed T2 read a message committed T1 wrote (at the position read)

Per run, over committed transactions:

  cycles_g0      strongly connected components of the ww graph (G0, write cycles).
                 Kafka's transactions do not isolate writes: Jepsen's checker allows G0
                 ("G0 is always allowed, since writes are never isolated"); measured.
  cycles_g1c     components of the ww + wr graph with a wr edge inside (a cycle through
                 a read: G1c with write order). Also expected of non-isolated writes.
  cycles_g1c_wr  components of the wr graph alone: circular information flow, T1 read
                 T2's committed write and T2 read T1's. A read_committed reader never
                 allows it (an anomaly in every verdict: checkers.analysis.LOG_ANOMALIES).
  processed_twice  inputs whose output two committed transactions wrote (exactly-once
                 broken: one input, two committed effects)
  unprocessed    committed inputs no committed transaction wrote an output for, once the
                 processors had caught up (the drain: harness/brokers/kafka/__init__.py)

Each figure's first examples print one cycle per component as Elle does: the transactions
and, on each edge, its kind and the position that gives it. A run whose history has no
transaction has these as None; one with transactions but no processor has the EOS figures
None. The graph is built in Spark (one sort of the positioned writes by partition, one join
of the processors' reads), its rows numbers only: transactions and sources by their 64-bit
hashes (two of a run's names sharing one is a chance of about n^2 / 2^64); each run's graph
is solved where Spark grouped it (applyInPandas: scipy's strongly connected components,
linear in the edges), and only the printed cycles' names are looked up again.
"""
from __future__ import annotations

from pyspark.sql import DataFrame

from checkers.analysis import SAMPLES, Query, _int, _sample, sql
from checkers.logs import READ, WRITE

FIGURES = ("cycles_g0", "cycles_g1c", "cycles_g1c_wr", "processed_twice", "unprocessed")
SAMPLED = FIGURES
CYCLE_FIGURES = FIGURES[:3]
EOS_FIGURES = FIGURES[3:]
EXAMPLES = ("ex_g0", "ex_g1c", "ex_g1c_wr")  # the solver's printed cycles, as numbers (see _printed)
_SOLVED = ("run long, cycles_g0 long, cycles_g1c long, cycles_g1c_wr long, "
           "ex_g0 array<array<bigint>>, ex_g1c array<array<bigint>>, ex_g1c_wr array<array<bigint>>")


def edges(produce: DataFrame, consume: DataFrame) -> DataFrame:
    """(run, a, b, wr, s, o1, o2): one row per position that makes a dependency between two
    committed transactions (a -> b; ``wr`` 1 for a read, 0 for write order), numbers only
    (transactions and sources by their 64-bit hashes: fixed-width rows through the shuffle
    and into the solver; the printed cycles get their names back in ``decode``): ``s`` the
    source, ``o2`` the offset of b's write (ww) or of the read (wr), ``o1`` a's write before
    it (ww; -1 for wr). Not deduplicated: the solver takes an edge twice as once."""
    writes = sql(f"SELECT run, xxhash64(txn) AS th, xxhash64(source) AS sh, source, `offset`, msg_id FROM {{p}} "
                 f"WHERE {WRITE} AND txn IS NOT NULL", p=produce)
    ww = sql("SELECT run, a, th AS b, 0 AS wr, sh AS s, o1, `offset` AS o2 FROM (SELECT *, lag(th) OVER w AS a, "
             "lag(`offset`) OVER w AS o1 FROM {w} WINDOW w AS (PARTITION BY run, source ORDER BY `offset`)) "
             "WHERE a IS NOT NULL AND a != th", w=writes)
    committed = sql("SELECT DISTINCT run, th FROM {w}", w=writes)
    reads = sql(f"SELECT run, xxhash64(txn) AS rth, source, `offset`, msg_id FROM {{c}} WHERE {READ} "
                f"AND txn IS NOT NULL AND source IS NOT NULL AND `offset` IS NOT NULL", c=consume)
    wr = sql("SELECT r.run, w.th AS a, r.rth AS b, 1 AS wr, w.sh AS s, CAST(-1 AS BIGINT) AS o1, r.`offset` AS o2 "
             "FROM {r} r JOIN {w} w ON r.run = w.run AND r.source = w.source AND r.`offset` = w.`offset` "
             "AND r.msg_id = w.msg_id LEFT SEMI JOIN {c} c ON r.run = c.run AND r.rth = c.th WHERE w.th != r.rth",
             r=reads, w=writes, c=committed)
    return sql("SELECT * FROM {ww} UNION ALL SELECT * FROM {wr}", ww=ww, wr=wr)


def cycles_query(produce: DataFrame, consume: DataFrame) -> Query:
    solved = edges(produce, consume).groupBy("run").applyInPandas(_solve_frame, _SOLVED)

    def decode(rows):
        names = _names(produce, consume, {h for r in rows for k in EXAMPLES for c in (r[k] or [])
                                           for i, h in enumerate(c) if i % 6 in (0, 1, 3)})
        return {r.run: {"cycles_g0": r.cycles_g0, "cycles_g1c": r.cycles_g1c, "cycles_g1c_wr": r.cycles_g1c_wr,
                        "cycle_samples": {f: [_printed(c, names) for c in (r[k] or [])]
                                          for f, k in zip(CYCLE_FIGURES, EXAMPLES)}} for r in rows}
    return solved, decode


def _names(produce: DataFrame, consume: DataFrame, hashes: set[int]) -> dict[int, str]:
    """The transactions' and sources' names behind the hashes the printed cycles use (a
    small job, only when some run has a cycle)."""
    if not hashes:
        return {}
    wanted = ", ".join(str(h) for h in sorted(hashes))
    text = (f"SELECT DISTINCT xxhash64(txn) AS h, txn AS name FROM {{p}} WHERE txn IS NOT NULL AND xxhash64(txn) IN ({wanted}) "
            f"UNION SELECT DISTINCT xxhash64(source), source FROM {{p}} WHERE source IS NOT NULL "
            f"AND xxhash64(source) IN ({wanted})")
    return {r.h: r.name for r in sql(text, p=produce).collect()}


def _printed(flat: list[int], names: dict[int, str]) -> str:
    """A cycle (flat: a, b, wr, s, o1, o2 per edge) as Elle prints one."""
    edges = [flat[i:i + 6] for i in range(0, len(flat), 6)]
    parts = []
    for a, _, wr, s, o1, o2 in edges:
        src = names.get(s, f"#{s}")
        parts.append(f"{names.get(a, f'#{a}')} -{'wr' if wr else 'ww'} "
                     + (f"{src} @{o2}" if wr else f"{src} @{o1}<@{o2}") + "-> ")
    return "".join(parts) + names.get(edges[0][0], f"#{edges[0][0]}") if edges else ""


def eos_query(produce: DataFrame) -> Query:
    """Per input (a producer's committed message, keyed by its id; an output keyed by the
    input it came from): whether one committed transaction wrote its output, several, or
    none (the transactions by hash: fixed-width aggregation buffers, as in checkers.analysis)."""
    per = sql("SELECT run, coalesce(from_msg, msg_id) AS k, "
              "max(CASE WHEN from_msg IS NULL AND outcome = 'ok' THEN 1 ELSE 0 END) AS inp, "
              "min(CASE WHEN from_msg IS NOT NULL AND outcome = 'ok' THEN xxhash64(txn) END) AS t1, "
              "max(CASE WHEN from_msg IS NOT NULL AND outcome = 'ok' THEN xxhash64(txn) END) AS t2, "
              "max(CASE WHEN from_msg IS NOT NULL THEN 1 ELSE 0 END) AS proc "
              "FROM {p} WHERE NOT `_bad` AND txn IS NOT NULL GROUP BY run, coalesce(from_msg, msg_id)", p=produce)
    twice, never = "t1 != t2", "inp = 1 AND t1 IS NULL"
    text = (f"SELECT run, max(proc) AS proc, sum({_int(twice)}) AS twice, sum({_int(never)}) AS never, "
            f"{_sample(twice, 'k', 'k')} AS twice_ids, {_sample(never, 'k', 'k')} AS never_ids FROM {{x}} GROUP BY run")

    def decode(rows):
        return {r.run: ({"processed_twice": r.twice, "unprocessed": r.never,
                         "cycle_samples": {"processed_twice": list(r.twice_ids or []),
                                           "unprocessed": list(r.never_ids or [])}} if r.proc else {})
                for r in rows}
    return sql(text, x=per), decode


def queries(produce: DataFrame, consume: DataFrame | None) -> list[Query]:
    """The cycle search (with a consume log) and the exactly-once figures, for a run
    history with transactions (checkers.check.present)."""
    return [cycles_query(produce, consume) if consume is not None else None, eos_query(produce)]


def combine(parts: list[dict | None], txn_runs: set[int], run_ids) -> dict[int, dict]:
    """Each run's figures: None where the run has no transaction; the EOS figures None
    without a processor; a transactional run absent from the cycle part has no edge (zero)."""
    out = {}
    cycles, eos = (parts + [None, None])[:2]
    for rid in run_ids:
        d = {k: None for k in FIGURES}
        samples = {k: [] for k in SAMPLED}
        if rid in txn_runs:
            if cycles is not None:
                d.update({k: 0 for k in CYCLE_FIGURES})
            for part in (cycles, eos):
                got = dict((part or {}).get(rid) or {})
                samples.update(got.pop("cycle_samples", {}))
                d.update(got)
        d["cycle_samples"] = {k: v[:SAMPLES] for k, v in samples.items()}
        out[rid] = d
    return out


# -- one run's graph, where Spark grouped it ------------------------------------------------

def _solve_frame(pdf):
    import numpy as np
    import pandas as pd
    run = int(pdf["run"].iloc[0])
    cols = {k: pdf[k].to_numpy(np.int64) for k in ("a", "b", "wr", "s", "o1", "o2")}
    got = solve_arrays(cols["a"], cols["b"], cols["wr"].astype(bool))
    flat = (lambda cycle: [int(cols[k][i]) for i in cycle for k in ("a", "b", "wr", "s", "o1", "o2")])
    return pd.DataFrame([{"run": run, **{k: got[k] for k in CYCLE_FIGURES},
                          **{e: [flat(c) for c in got["examples"][f]] for f, e in zip(CYCLE_FIGURES, EXAMPLES)}}])


def solve(edges: list[tuple[str, str, str, str]], examples: int = SAMPLES) -> dict:
    """``solve_arrays`` on named edges (a, b, kind, label), its cycles printed with the
    names and labels: components counted, one cycle per component (the first by name)."""
    import numpy as np
    names = sorted({e[0] for e in edges} | {e[1] for e in edges})
    rank = {n: i for i, n in enumerate(names)}  # ids in name order: the examples' order is the names'
    a = np.array([rank[e[0]] for e in edges], dtype=np.int64)
    b = np.array([rank[e[1]] for e in edges], dtype=np.int64)
    got = solve_arrays(a, b, np.array([e[2] == "wr" for e in edges], dtype=bool), examples)
    got["examples"] = {f: ["".join(f"{edges[i][0]} -{edges[i][2]} {edges[i][3]}-> " for i in cycle) + edges[cycle[0]][0]
                           for cycle in cycles] for f, cycles in got["examples"].items()}
    return got


def solve_arrays(a, b, wr, examples: int = SAMPLES) -> dict:
    """The cycle figures of one run's edges (int64 vertex ids ``a`` -> ``b``, ``wr`` true
    for a read): the components counted per figure, and for up to ``examples`` of each
    (the lowest ids first), one cycle as the indexes of its edges in the given arrays."""
    import numpy as np
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    ids, codes = np.unique(np.concatenate([a, b]), return_inverse=True)
    m, n = len(a), len(ids)
    order = np.lexsort((wr, codes[m:], codes[:m]))  # by a, then b, ww before wr
    aa, bb, w = codes[:m][order], codes[m:][order], np.asarray(wr, dtype=bool)[order]

    def components(mask):
        if n == 0:
            return np.zeros(0, dtype=np.int64)
        g = coo_matrix((np.ones(int(mask.sum())), (aa[mask], bb[mask])), shape=(n, n)).tocsr()
        return connected_components(g, directed=True, connection="strong")[1]

    out = {"examples": {}}
    for figure, mask, through in (("cycles_g0", ~w, ~w), ("cycles_g1c", np.ones(m, bool), w), ("cycles_g1c_wr", w, w)):
        lab = components(mask)
        inside = np.flatnonzero(mask & through & (lab[aa] == lab[bb])) if n else np.zeros(0, dtype=np.int64)
        _, first = np.unique(lab[aa[inside]], return_index=True)  # each component's first inside edge
        out[figure] = len(first)
        out["examples"][figure] = [
            [int(order[i]) for i in _cycle(aa, bb, np.flatnonzero(mask & (lab[aa] == lab[aa[f]]) & (lab[bb] == lab[aa[f]])), f)]
            for f in np.sort(inside[first])[:examples]]
    return out


def _cycle(a, b, within, first) -> list[int]:
    """A cycle through edge ``first``: it, then the shortest way back over ``within`` (the
    component's edges of the figure's kinds), as edge indexes."""
    u, v = int(a[first]), int(b[first])
    succ: dict[int, list] = {}
    for i in within.tolist():
        succ.setdefault(int(a[i]), []).append(i)
    back, frontier, seen = {}, [v], {v}
    while frontier and u not in seen:
        nxt = []
        for x in frontier:
            for i in succ.get(x, []):
                y = int(b[i])
                if y not in seen:
                    seen.add(y)
                    back[y] = i
                    nxt.append(y)
        frontier = nxt
    path, x = [], u
    while x != v:
        path.append(back[x])
        x = int(a[back[x]])
    return [int(first), *reversed(path)]
