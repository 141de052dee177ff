"""Storage corruption (issue 38): bit-flips and truncations of a node's newest data files
(capability ``corrupt``: the cluster's ``DataFiles``)."""
from __future__ import annotations

from typing import Any

from harness.brokers.capabilities import CORRUPT, DataFiles, ability
from nemesis.kinds import Ctx, Fault, FaultType, prove, real
from nemesis.targets import TargetError, resolve


def plan_corrupt(ctx: Ctx, f: Fault, spec: Any, params: dict) -> None:
    """Storage corruption (Jepsen's NATS 2.12 analysis: bit-flips and truncations of a
    minority's files): on each target, the newest files of ``params.files`` (one of the
    broker's ``data_file_kinds``), listed while the node runs. ``mode: bitflip`` flips one
    seeded bit in each of ``bytes`` (default 1) seeded bytes within the file's last ``tail``
    bytes (default: anywhere); ``mode: truncate`` cuts ``bytes`` (default half the file)
    from its end. ``crash: true`` kills the node first and corrupts it while down
    (crash-then-corrupt; a later ``start`` lifts it), else the running node's files change
    in place (corrupt-then-restart: a later kill / restart step)."""
    kinds = ability(ctx.cluster, DataFiles).kinds()
    kind, mode = params.get("files"), params.get("mode", "bitflip")
    if kind not in kinds:
        raise TargetError(f"corrupt needs params.files, one of {sorted(kinds)}, not {kind!r}")
    if mode not in ("bitflip", "truncate"):
        raise TargetError(f"corrupt: params.mode must be bitflip or truncate, not {mode!r}")
    f.targets = real(ctx, resolve(ctx.cluster, spec, ctx.rng, ctx.subject), f.fault)
    plan: dict[str, list[dict]] = {}
    for node in f.targets:
        files = ability(ctx.cluster, DataFiles).data_files(node, kind, ctx.subject)
        if not files:
            raise TargetError(f"corrupt: {node} has no {kind} files yet")
        plan[node] = [_file_plan(ctx, path, size, mode, params) for path, size in files if size > 0]
    f.details.update({"files": plan, "mode": mode, "kind": kind, "crash": bool(params.get("crash", False))})
    if params.get("crash"):
        f.undo["start"] = list(f.targets)
    f.instant = not params.get("crash")


def _file_plan(ctx: Ctx, path: str, size: int, mode: str, params: dict) -> dict:
    if mode == "truncate":
        cut = int(params.get("bytes", size // 2))
        return {"path": path, "size": size, "truncate_to": max(0, size - cut)}
    lo = max(0, size - int(params.get("tail", size)))
    positions = sorted(ctx.rng.sample(range(lo, size), min(int(params.get("bytes", 1)), size - lo)))
    return {"path": path, "size": size, "positions": positions, "bits": [ctx.rng.randrange(8) for _ in positions]}


def _corrupt(ctx: Ctx, f: Fault, params: dict) -> None:
    """Each planned file changed, then read back: the evidence is the bytes before and after
    (or the size cut to); a change that did not read back makes the fault ineffective."""
    c, files, done = ctx.cluster, ability(ctx.cluster, DataFiles), []
    for node, entries in f.details["files"].items():
        if f.details.get("crash"):
            c.kill(node)
        for e in entries:
            if "truncate_to" in e:
                files.patch_file(node, e["path"], size=e["truncate_to"])
                end = files.file_bytes(node, e["path"], [e["truncate_to"]] + ([e["truncate_to"] - 1] if e["truncate_to"] else []))
                done.append(e["truncate_to"] not in end and (e["truncate_to"] == 0 or e["truncate_to"] - 1 in end))
                continue
            before = files.file_bytes(node, e["path"], e["positions"])
            changes = {p: before[p] ^ (1 << b) for p, b in zip(e["positions"], e["bits"]) if p in before}
            files.patch_file(node, e["path"], changes)
            after = files.file_bytes(node, e["path"], list(changes))
            e["bytes"] = {str(p): [f"{before[p]:02x}", f"{after.get(p, -1) & 0xff:02x}"] for p in changes}
            done.append(bool(changes) and all(after.get(p) == v for p, v in changes.items()))
    down = {n: not c.running(n) for n in f.targets} if f.details.get("crash") else {}
    prove(f, {"files_changed": sum(done), "files": len(done), **({"down": down} if down else {})},
          bool(done) and all(done) and all(down.values()))


TYPES = (
    FaultType("corrupt", plan_corrupt, _corrupt, "start", needs=frozenset({CORRUPT}),
              drawn={"targets": "random:1", "params": {"mode": "bitflip", "bytes": 16, "tail": 65536, "crash": True}},
              does="bit-flips or truncates the nodes' newest data files"),
)
