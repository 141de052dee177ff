"""Each newer broker version on a real cluster: its three nodes report that version, and one
short scenario under a fault runs to a verdict on it (issue 16's "done when")."""
import json

import pytest

from harness.runner import run_scenario
from harness.scenario import parse

pytestmark = pytest.mark.docker


def _quorum_leader_kill(version):
    return parse({
        "name": f"gen-rabbitmq-{version}", "broker": "rabbitmq", "version": version,
        "queue": {"name": "genq", "type": "quorum"},
        "workload": {"producers": 2, "consumers": 1, "rate": 100, "confirm_timeout": 10},
        "timing": {"warmup": 2, "duration": 14, "recovery": 3, "drain_idle": 2},
        "nemesis": [{"at": 0, "fault": "kill", "targets": "quorum_leader"},
                    {"at": 6, "fault": "start", "targets": "all"}],
        "probes": {"metadata": {"at": 1, "timeout": 10}},
        "expect": {"lost": 0},
    })


@pytest.mark.parametrize("version", ["4.0", "4.3"])
def test_rabbitmq_version_runs_a_scenario(tmp_path, version):
    code, run = run_scenario(_quorum_leader_kill(version), results=tmp_path)
    assert run.info["status"] == "completed", run.info
    info = json.loads((run.dir / "run.json").read_text())
    assert info["params"]["version"] == version
    nodes = info["brokers"]["nodes"]
    assert sorted(nodes) == ["rabbit1", "rabbit2", "rabbit3"]
    assert all(n["version"] == version and n["rabbitmq"].startswith(version + ".") for n in nodes.values()), nodes
    check = json.loads((run.dir / "check.json").read_text())
    assert check["ok"] > 0 and check["lost"] == 0 and code == 0, (code, check)
    m = info["measurements"]
    assert m["delivery_limit"] == 20  # 4.x's default: recorded, not assumed
    # the killed leader's node cannot take a metadata write; the other two can
    assert len(m["metadata_write_ok"]) == 2 and len(m["metadata_write_failed"]) == 1, m
