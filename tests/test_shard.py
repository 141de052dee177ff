"""The catalogue split across machines (harness/batch/shard.py, `mqchaos catalogue --shard`):
every row in exactly one shard, the same split every time, balanced by the published wall
times as the longest-processing-time rule promises (checked against the best split found by
brute force), and the shards' summaries merged back into the unsharded table."""
from __future__ import annotations

import itertools
import json
import random

import pytest

from harness import batch as catalogue
from harness.batch import shard
from harness.batch.jobs import plan


def test_parse_takes_i_of_n_and_names_what_is_wrong():
    assert shard.parse("2/4") == (2, 4) and shard.parse(" 1 / 1 ") == (1, 1)
    for bad in ("0/4", "5/4", "2", "a/b", "", "2/0"):
        with pytest.raises(ValueError, match="--shard"):
            shard.parse(bad)


def _best_longest(costs: list[float], n: int) -> float:
    """The smallest possible longest shard, by trying every assignment (the reference)."""
    best = float("inf")
    for assign in itertools.product(range(n), repeat=len(costs)):
        load = [0.0] * n
        for c, k in zip(costs, assign):
            load[k] += c
        best = min(best, max(load))
    return best


@pytest.mark.parametrize("seed", range(25))
def test_split_is_a_partition_within_four_thirds_of_the_best(seed):
    rng = random.Random(seed)
    names = [f"R{i}" for i in range(rng.randint(1, 8))]
    n = rng.randint(1, 3)
    times = {x: float(rng.randint(5, 600)) for x in names}
    parts = shard.split(names, times, n)
    assert len(parts) == n
    assert sorted(x for p in parts for x in p) == sorted(names)  # each row once
    for p in parts:  # each shard keeps the catalogue's order
        assert p == [x for x in names if x in p]
    longest = max(sum(times[x] for x in p) for p in parts)
    assert longest <= 4 / 3 * _best_longest([times[x] for x in names], n) + 1e-9
    assert shard.split(list(names), dict(times), n) == parts  # the same split every time


def test_a_row_never_published_counts_as_the_median_of_the_known():
    parts = shard.split(["A", "B", "C", "new"], {"A": 100.0, "B": 10.0, "C": 30.0}, 2)
    # new costs 30: A alone (100) against B + C + new (70)
    assert parts == [["A"], ["B", "C", "new"]]
    assert shard.split(["x", "y"], {}, 2) == [["x"], ["y"]]


def test_wall_times_take_the_newest_batch_and_the_median_of_its_runs(tmp_path):
    old, new = tmp_path / "2026-01-01T00-00-00Z", tmp_path / "2026-02-01T00-00-00Z"
    for d, rows in ((old, [{"scenario": "A", "seconds": 50}, {"scenario": "B", "seconds": 70}]),
                    (new, [{"scenario": "A", "seconds": 10}, {"scenario": "A", "seconds": 30},
                           {"scenario": "A", "seconds": 200}, {"scenario": "C", "seconds": None}])):
        d.mkdir()
        (d / "summary.json").write_text(json.dumps(rows))
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "summary.json").write_text("{not json")
    assert shard.wall_times(tmp_path.iterdir()) == {"A": 30.0, "B": 70.0}


def test_the_catalogues_shards_are_disjoint_and_together_the_whole():
    whole, _ = plan()
    names = [sc.name for sc, _, _ in whole]
    shards = [[sc.name for sc, _, _ in plan(shard=(i, 3))[0]] for i in (1, 2, 3)]
    assert sorted(x for s in shards for x in s) == sorted(names)
    assert all(s for s in shards)
    times = shard.wall_times()
    loads = [sum(times.get(x, 0.0) for x in s) for s in shards]
    assert max(loads) <= 4 / 3 * (sum(loads) / 3) + max(times.values(), default=0.0)


def _row(name: str, seconds: float = 10.0) -> dict:
    return {"scenario": name, "id": name.split("-")[0], "repeat": 0, "seconds": seconds, "retried": False,
            "harness_error": False, "prediction": True, "reason": "", "attempted": 10, "confirmed": 10,
            "lost": 0, "duplicated": 0, "ordering_violations": 0, "unavailable_s": 0.0, "measurement": {},
            "expect": {"lost": 0}, "report": None, "earlier_attempts": []}


def test_the_shards_summaries_merge_into_the_unsharded_table(tmp_path):
    names = ["R1-mirrored-kill-master", "R9-pause-minority", "Q1-quorum-leader-faults", "K3-acks-all-minisr2",
             "R48-balancer-drops-down-and-paused-nodes"]
    times = {n: float(10 * (i + 1)) for i, n in enumerate(names)}
    whole = tmp_path / "whole"
    catalogue.write_outputs([_row(n) for n in names], [], whole, "whole")
    dirs = []
    for i, part in enumerate(shard.split(names, times, 2), 1):
        d = tmp_path / f"shard{i}"
        catalogue.write_outputs([_row(n) for n in part], [], d, f"shard {i}")
        dirs.append(d)
    merged = catalogue.merge(dirs, results=tmp_path, kind="merged")
    again = catalogue.merge([whole], results=tmp_path, kind="unsharded")
    assert json.loads((merged / "summary.json").read_text()) == json.loads((again / "summary.json").read_text())


def test_same_rows_names_what_differs_and_ignores_each_runs_own_figures():
    whole = [_row("A-x"), _row("B-y"), _row("C-z")]
    other_figures = [dict(r, attempted=99, lost=3, seconds=70.0) for r in whole]
    assert shard.same_rows(whole, other_figures)["same"]
    flipped = [whole[0], dict(whole[1], prediction=False), whole[2]]
    got = shard.same_rows(whole, flipped)
    assert not got["same"] and [d["row"][0] for d in got["verdict_differs"]] == ["B-y"]
    got = shard.same_rows(whole, [whole[0], whole[2]])
    assert not got["same"] and got["only_whole"] == [["B-y", None, 0]] and not got["order_differs"]
    got = shard.same_rows(whole, [whole[1], whole[0], whole[2]])
    assert not got["same"] and got["order_differs"] and not got["verdict_differs"]
    got = shard.same_rows(whole, whole + [_row("D-w")])
    assert got["only_merged"] == [["D-w", None, 0]]


def test_budget_splits_what_is_known_and_floors_each_split_at_the_declared_load():
    load = {"A": 60.0, "B": 30.0, "C": 30.0, "new": 10.0}
    got = shard.budget(load, {"A": 100.0, "B": 40.0, "C": 70.0}, machines=(1, 2, 8))
    assert (got["rows"], got["published"], got["unpublished"]) == (4, 3, 1)
    assert got["published_s"] == 210.0 and got["published_load_s"] == 120.0 and got["guess_s"] == 70.0
    assert got["load_s"] == 130.0
    # one machine: every row, the unpublished one at the median (70)
    assert got["machines"][1] == {"expected_s": 280.0, "floor_s": 130.0}
    # two, longest first to the least loaded: A | C, then new (70) to C's, then B (40) to A's: 140 each
    assert got["machines"][2] == {"expected_s": 140.0, "floor_s": 65.0}
    # more machines than rows: the longest row bounds both
    assert got["machines"][8] == {"expected_s": 100.0, "floor_s": 60.0}
