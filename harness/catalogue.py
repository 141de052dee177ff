"""The scenario catalogue: every row of SCENARIOS.md run against a real cluster and
judged against its prediction, in one table.

    mqchaos catalogue [--only R2,K7] [--repeat N]

Each scenario runs on a fresh cluster; the histories of all runs are then
checked in ONE Spark job (start-up paid once), and each run gets its verdict
and report. A run whose harness failed (cluster never healthy, client crashed)
is retried once and marked so: it is never counted as a broker finding.
Output: results/catalogue/<timestamp>/summary.{md,json} and junit.xml.
"""
from __future__ import annotations

import json
import signal
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from xml.sax.saxutils import escape, quoteattr

from harness.runner import EXIT_INVALID, EXIT_UNKNOWN, EXIT_VALID, RESULTS, Interrupted, Run, log
from harness.scenario import Scenario, ScenarioError, load

SCENARIO_DIR = Path(__file__).resolve().parent.parent / "scenarios"


@dataclass
class Entry:
    """One scenario run of the catalogue (after its retry, if any)."""
    scenario: Scenario
    repeat: int
    run: Run | None = None
    seconds: float = 0.0
    attempts: list[dict] = field(default_factory=list)  # harness errors of earlier attempts
    code: int = EXIT_UNKNOWN

    @property
    def status(self) -> str:
        return self.run.info.get("status", "not run") if self.run else "not run"


def select(files: list[Path], only: list[str] | None) -> tuple[list[Scenario], list[tuple[str, str]]]:
    """Scenarios to run, in catalogue order (R, Q, K; then by id), and the files that did not
    validate (each with its error). `only` matches ids (R5 picks R5 and R5b) or names."""
    scenarios, bad = [], []
    for f in files:
        try:
            scenarios.append(load(f))
        except ScenarioError as e:
            bad.append((str(f), str(e)))
    if only:
        want = [o.strip() for o in only if o.strip()]
        scenarios = [s for s in scenarios
                     if any(s.name == w or (s.id or "") == w or s.name.startswith(w + "-")
                            or (s.id or "").rstrip("abcdefgh") == w for w in want)]
    return sorted(scenarios, key=order_key), bad


def order_key(sc: Scenario) -> tuple:
    sid = sc.id or sc.name
    head = "RQK".find(sid[:1]) if sid[:1] in "RQK" else 9
    digits = "".join(ch for ch in sid[1:] if ch.isdigit())
    return head, int(digits or 0), sc.name


def run_one(sc: Scenario, repeat: int, results: Path, retries: int = 1) -> Entry:
    e = Entry(sc, repeat)
    for attempt in range(retries + 1):
        t0 = time.monotonic()
        run = Run(sc, results=results, check=False)
        run.info["catalogue"] = {"repeat": repeat, "attempt": attempt}
        run.execute()
        e.run, e.seconds = run, round(time.monotonic() - t0, 1)
        if run.info["status"] != "harness-error":
            break
        e.attempts.append({"run": str(run.dir), "error": run.info.get("error")})
        log(f"{sc.name}: harness error ({run.info.get('error')}); "
            + ("retrying once" if attempt < retries else "giving up"))
    return e


def check_all(entries: list[Entry], master: str | None = None) -> None:
    """One Spark job over every completed run; then each run's verdict and report."""
    done = [e for e in entries if e.status == "completed"]
    if not done:
        return
    from checkers.check import check_runs
    from checkers.history import convert, open_runs
    from checkers.spark import session

    spark = session(master, "mqchaos-catalogue")
    for e in done:
        convert(spark, str(e.run.dir))
    runs, errors = open_runs([str(e.run.dir) for e in done])
    for path, err in errors:
        log(f"check: {path}: {err}")
    results = check_runs(spark, runs)  # each run under its own ordering rule (run.json)
    for e in done:
        res = results.get(str(e.run.dir))
        if res is None:
            e.code = EXIT_UNKNOWN
            continue
        e.code = e.run.finish(res)


def row(e: Entry) -> dict:
    base = {"id": e.scenario.id, "scenario": e.scenario.name, "repeat": e.repeat, "seconds": e.seconds,
            "status": e.status, "retried": bool(e.attempts), "earlier_attempts": e.attempts,
            "expect": e.scenario.expect, "exit": e.code}
    s = (e.run.info.get("summary") if e.run else None) or {}
    if s:
        base.update(s)
    else:
        base.update(prediction=None, reason=(e.run.info.get("error") if e.run else None)
                    or f"run {e.status}", report=str(e.run.dir) if e.run else None)
    base["harness_error"] = e.status != "completed"
    return base


VERDICT = {True: "held", False: "DID NOT HOLD", None: "could not decide"}


def _fmt(v) -> str:
    if isinstance(v, dict):
        return ", ".join(f"{k}={_fmt(x)}" for k, x in v.items())
    if isinstance(v, float):
        return f"{v:g}"
    return "-" if v is None else str(v)


def markdown(rows: list[dict], out: Path, title: str) -> str:
    head = ["id", "scenario", "attempted", "confirmed", "lost", "dup", "order viol.", "unavail. s",
            "measurement", "prediction", "verdict", "run s"]
    lines = [f"# {title}", "", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        rep = r.get("report")
        link = f"[{r['scenario']}]({Path(rep).relative_to(out.parent.parent) if rep and _under(rep, out.parent.parent) else rep})" \
            if rep else r["scenario"]
        verdict = "harness error" + (" (retried)" if r["retried"] else "") if r["harness_error"] \
            else VERDICT[r.get("prediction")] + (" (after a retry)" if r["retried"] else "")
        order = f"{r.get('ordering_violations', '-')} ({r.get('ordering') or '-'})"
        lines.append("| " + " | ".join(str(x) for x in (
            r.get("id") or "-", link, r.get("attempted", "-"), r.get("confirmed", "-"), r.get("lost", "-"),
            r.get("duplicated", "-"), order, _fmt(r.get("unavailable_s")), _fmt(r.get("measurement")),
            _fmt(r.get("expect")), verdict, r.get("seconds"))) + " |")
    lines += ["", "Verdicts: *held* = the source's prediction was borne out; *DID NOT HOLD* = the broker "
              "behaved otherwise (a finding, see the run's report); *could not decide* = the run did not "
              "measure what the prediction needs (reason in summary.json); *harness error* = not a "
              "broker finding."]
    return "\n".join(lines) + "\n"


def _under(path: str, root: Path) -> bool:
    try:
        Path(path).relative_to(root)
        return True
    except ValueError:
        return False


def junit(rows: list[dict], name: str = "mqchaos-catalogue") -> str:
    """One testcase per scenario run: a prediction that did not hold is a failure (with the
    figures), a harness error is an error, a run that could not decide is skipped."""
    cases, failures, errors, skipped = [], 0, 0, 0
    for r in rows:
        cname = f"{r['scenario']}" + (f" #{r['repeat']}" if r.get("repeat") else "")
        figures = (f"attempted={r.get('attempted')} confirmed={r.get('confirmed')} lost={r.get('lost')} "
                   f"duplicated={r.get('duplicated')} ordering_violations={r.get('ordering_violations')} "
                   f"unavailable_s={r.get('unavailable_s')} measurement={_fmt(r.get('measurement'))} "
                   f"predicted={_fmt(r.get('expect'))} report={r.get('report')}")
        body = ""
        if r["harness_error"]:
            errors += 1
            body = f"<error message={quoteattr(str(r.get('reason')))}>{escape(json.dumps(r.get('earlier_attempts')))}</error>"
        elif r.get("prediction") is False:
            failures += 1
            body = f"<failure message={quoteattr(str(r.get('reason')))}>{escape(figures)}</failure>"
        elif r.get("prediction") is None:
            skipped += 1
            body = f"<skipped message={quoteattr(str(r.get('reason')))}/>"
        props = f"<system-out>{escape(figures)}{' (retried after a harness error)' if r['retried'] else ''}</system-out>"
        cases.append(f'  <testcase classname={quoteattr("mqchaos." + (r.get("id") or r["scenario"]))} '
                     f'name={quoteattr(cname)} time="{r.get("seconds") or 0}">{body}{props}</testcase>')
    total = sum(float(r.get("seconds") or 0) for r in rows)
    return ('<?xml version="1.0" encoding="UTF-8"?>\n'
            f'<testsuite name={quoteattr(name)} tests="{len(rows)}" failures="{failures}" errors="{errors}" '
            f'skipped="{skipped}" time="{total:.1f}">\n' + "\n".join(cases) + "\n</testsuite>\n")


def write_outputs(rows: list[dict], invalid: list[tuple[str, str]], out: Path, title: str) -> None:
    out.mkdir(parents=True, exist_ok=True)
    for path, err in invalid:
        rows.append({"scenario": path, "id": None, "repeat": 0, "seconds": 0, "status": "invalid scenario file",
                     "retried": False, "harness_error": True, "reason": err, "expect": None, "exit": EXIT_UNKNOWN})
    (out / "summary.json").write_text(json.dumps(rows, indent=1, default=str) + "\n")
    (out / "summary.md").write_text(markdown(rows, out, title))
    (out / "junit.xml").write_text(junit(rows))
    link = out.parent / "latest"
    tmp = out.parent / "latest.tmp"
    if tmp.is_symlink():
        tmp.unlink()
    tmp.symlink_to(out.name)
    tmp.replace(link)


def rows_from_runs(run_dirs: list[Path]) -> list[dict]:
    """Summary rows rebuilt offline from run directories (run.json + check.json), e.g. when
    a catalogue was interrupted before its summary: per scenario and repeat, the last
    completed attempt, the earlier harness errors counted as retries."""
    from harness import report
    from harness.scenario import parse

    by_key: dict[tuple, list] = {}
    for d in sorted(run_dirs, key=lambda d: Path(d).name):
        try:
            info = json.loads((Path(d) / "run.json").read_text())
        except (OSError, ValueError):
            continue
        rep = (info.get("catalogue") or {}).get("repeat", 0)
        by_key.setdefault((info["scenario"], rep), []).append((Path(d), info))
    rows = []
    for (name, rep), attempts in by_key.items():
        d, info = attempts[-1]
        sc = parse(info["params"], str(d / "run.json"))
        earlier = [{"run": str(a), "error": i.get("error")} for a, i in attempts[:-1]
                   if i.get("status") == "harness-error"]
        base = {"id": sc.id, "scenario": name, "repeat": rep, "status": info.get("status"),
                "seconds": round(max((info.get("phases") or {"": 0}).values()), 1),
                "retried": bool(earlier), "earlier_attempts": earlier, "expect": sc.expect}
        check = d / "check.json"
        if info.get("status") == "completed" and check.exists():
            result = json.loads(check.read_text())
            if "prediction" not in result:
                result["prediction"] = report.verdict(sc, result, info)
            base.update(report.summary_row(sc, result, info, d))
            base["harness_error"] = False
        else:
            base.update(prediction=None, reason=info.get("error") or f"run {info.get('status')}",
                        report=str(d), harness_error=True)
        rows.append(base)
    by_name = {sc.name: sc for sc in select(sorted(SCENARIO_DIR.glob("*.yaml")), None)[0]}
    rows.sort(key=lambda r: (order_key(by_name[r["scenario"]]) if r["scenario"] in by_name
                             else (9, 0, r["scenario"]), r["repeat"]))
    return rows


def merge(dirs: list[Path], results: Path = RESULTS, kind: str = "catalogue") -> Path:
    """One summary from several catalogue runs (e.g. a full run and a re-run of some rows):
    for each scenario and repeat, the row of the latest directory given that has it."""
    by_key: dict[tuple, dict] = {}
    for d in dirs:
        for r in json.loads((Path(d) / "summary.json").read_text()):
            by_key[(r["scenario"], r.get("repeat", 0))] = r
    rows = list(by_key.values())
    by_name = {sc.name: sc for sc in select(sorted(SCENARIO_DIR.glob("*.yaml")), None)[0]}
    rows.sort(key=lambda r: order_key(by_name[r["scenario"]]) if r["scenario"] in by_name else (9, 0, r["scenario"]))
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H-%M-%SZ")
    out = results / kind / stamp
    sources = ", ".join(Path(d).name for d in dirs)
    write_outputs(rows, [], out, f"mqchaos {kind}, merged from {sources}")
    return out


def _interrupted(signum, frame):
    raise Interrupted()


def run_catalogue(only: list[str] | None = None, repeat: int = 1, files: list[Path] | None = None,
                  results: Path = RESULTS, kind: str = "catalogue", retries: int = 1,
                  master: str | None = None) -> int:
    scenarios, invalid = select(files or sorted(SCENARIO_DIR.glob("*.yaml")), only)
    for path, err in invalid:
        log(err)
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H-%M-%SZ")
    out = results / kind / stamp
    t0 = time.monotonic()
    entries = []
    # SIGTERM (a CI time limit) ends the catalogue like Ctrl-C: what ran is still summarised.
    prev = signal.signal(signal.SIGTERM, _interrupted)
    interrupted = False
    try:
        for rep in range(repeat):
            for sc in scenarios:
                log(f"catalogue: {sc.name} (repeat {rep + 1}/{repeat}, {len(entries) + 1}/{len(scenarios) * repeat})")
                entries.append(run_one(sc, rep, results, retries))
                if entries[-1].status == "interrupted":  # the run healed and kept its history
                    raise Interrupted()
    except (KeyboardInterrupt, Interrupted):
        interrupted = True
        log("catalogue interrupted: checking and summarising the runs so far")
    try:  # Ctrl-C again during the check still leaves a summary (without verdicts)
        check_all(entries, master)
    except (KeyboardInterrupt, Interrupted):
        interrupted = True
    finally:
        rows = [row(e) for e in entries]
        write_outputs(rows, invalid, out, f"mqchaos {kind}, {stamp} ({time.monotonic() - t0:.0f} s)"
                      + (", interrupted" if interrupted else ""))
        log(f"summary: {out / 'summary.md'}")
        print((out / "summary.md").read_text())
        signal.signal(signal.SIGTERM, prev)
    if interrupted or invalid or any(r["harness_error"] or r.get("valid") is None for r in rows):
        return EXIT_UNKNOWN
    return EXIT_INVALID if any(r.get("valid") is False for r in rows) else EXIT_VALID
