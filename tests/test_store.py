"""The store's atomic writes: results/latest and the JSON records, from many threads."""


def test_pointing_latest_and_writing_json_from_many_threads_at_once_loses_nothing(tmp_path):
    """The flaky matrix test's suspect: every call used the same temporary name, so two runs
    pointing results/latest at once could remove each other's link."""
    import threading

    from harness import store

    link, doc, errors = tmp_path / "latest", tmp_path / "run.json", []

    def hammer(i: int) -> None:
        try:
            for k in range(200):
                store.point_latest(link, f"run-{i}-{k}")
                store.write_json(doc, {"i": i, "k": k})
        except Exception as exc:  # noqa: BLE001 - collected, asserted below
            errors.append(exc)
    threads = [threading.Thread(target=hammer, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and link.is_symlink() and store.read_json(doc)[0]["k"] == 199
    assert sorted(p.name for p in tmp_path.iterdir()) == ["latest", "run.json"]  # no temporary left


def test_two_runs_of_one_scenario_in_one_millisecond_get_a_directory_each(tmp_path, monkeypatch):
    """Issue 52, the flaky matrix test's cause: a batch of fake runs (or a matrix's repeats of
    a claim the version lacks, which bring nothing up) starts the same scenario's next run
    within the millisecond; its directory had the same name, mkdir raised FileExistsError out
    of the batch's loop, and the matrix command exited 1 with an empty batch directory."""
    from harness import store

    stamps = iter(["2026-01-01T00-00-00.001Z", "2026-01-01T00-00-00.001Z", "2026-01-01T00-00-00.002Z"])
    monkeypatch.setattr(store, "stamp", lambda precise=False: next(stamps))
    first, second = store.new_run_dir("Q90", tmp_path), store.new_run_dir("Q90", tmp_path)
    assert (first.name, second.name) == ("2026-01-01T00-00-00.001Z", "2026-01-01T00-00-00.002Z")
    assert (second / store.HISTORY).is_dir() and (tmp_path / "Q90" / store.LATEST).resolve() == second
