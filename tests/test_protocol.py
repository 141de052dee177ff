"""The plug-in contract is complete: whatever the nemesis and the run loop call on a cluster
is declared in harness.brokers.protocol, so a plug-in written from it alone (not from
ComposeCluster) survives its first partition."""
from __future__ import annotations

import ast
from pathlib import Path

from harness.brokers.compose import ComposeCluster
from harness.brokers.protocol import Cluster, NodeAccess, SaysWhole

ROOT = Path(__file__).resolve().parent.parent
# the modules above the plug-ins that hold a cluster
CALLERS = [*sorted((ROOT / "nemesis").rglob("*.py")),
           *(ROOT / "harness" / f for f in ("runner.py", "observe.py", "cluster_cli.py", "scenario.py"))]
# a cluster's settings (``sc.cluster``) share the name: they are not the cluster
SETTINGS_HOLDERS = {"sc", "scenario"}


def _cluster_attributes(path: Path) -> set[str]:
    """Attributes read off ``cluster``, ``c`` (the nemesis's short name) or ``<x>.cluster``."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if not isinstance(node, ast.Attribute):
            continue
        v = node.value
        if isinstance(v, ast.Name) and v.id in ("cluster", "c"):
            out.add(node.attr)
        elif (isinstance(v, ast.Attribute) and v.attr == "cluster"
              and not (isinstance(v.value, ast.Name) and v.value.id in SETTINGS_HOLDERS)):
            out.add(node.attr)
    return out


def _declared(cls: type) -> set[str]:
    names = set(dir(cls))
    for k in cls.__mro__:
        names |= set(getattr(k, "__annotations__", {}))
    return names


def test_what_the_nemesis_and_run_loop_call_on_a_cluster_is_declared():
    used = {a for p in CALLERS if p.exists() for a in _cluster_attributes(p)}
    # ``c`` is also a consumer in runner.py, and cluster_cli reads images off a
    # ComposeCluster only after asking isinstance
    others = {"name", "crashes", "cancels", "node_images"}
    assert "exec" in used and "gateway" in used  # the scan sees the nemesis's calls
    # an optional ability is a capability protocol the caller asks isinstance of first
    assert sorted(used - others - _declared(Cluster) - _declared(SaysWhole)) == []


def test_node_access_is_part_of_every_cluster():
    assert NodeAccess in Cluster.__mro__
    for name in ("project", "nodes", "address", "gateway", "exec"):
        assert name in _declared(NodeAccess)
    # the compose cluster implements node access and control: a plug-in writes the rest
    assert ComposeCluster.__abstractmethods__ == {
        "brokers", "client_endpoints", "healthy", "nodes", "stuck_nodes", "up", "versions",
        "wait_healthy", "wait_rejoined", "wait_whole"}
