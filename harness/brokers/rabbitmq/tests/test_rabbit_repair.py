"""The repair of a partition entry that outlives the cut (RabbitMQ under ``ignore``), without
Docker: the documented stop_app/start_app first; when start_app hangs (R7s on 3.10.8, twice:
Erlang's global name server "Faking nodedown/nodeup", then nothing for 120 s) the node itself
stopped and started, each step an operator event with what made it necessary."""
import pytest

from harness.brokers.protocol import ClusterError
from harness.brokers.rabbitmq import recovery


class Split:
    """rabbit1 cut from the others under ignore: the entries stay until rabbit1 is repaired;
    ``app_hangs``: its start_app times out (the app repaired only by the node's restart)."""

    def __init__(self, app_hangs: bool):
        self.app_hangs, self.whole, self.did = app_hangs, False, []

    def partition_handling(self):
        return "ignore"

    def healthy(self):
        return self.whole

    def partitions(self):
        return {} if self.whole else {"rabbit1": ["rabbit2", "rabbit3"], "rabbit2": ["rabbit1"], "rabbit3": ["rabbit1"]}

    def rabbitmqctl(self, node, *args, check=True, timeout=60):
        self.did.append(f"{args[0]} {node}")
        if args[0] == "start_app":
            if self.app_hangs:
                raise ClusterError(f"exec on {node} timed out after 120s: rabbitmqctl start_app")
            self.whole = True
        return 0, ""

    def stop(self, node):
        self.did.append(f"stop {node}")

    def start(self, node):
        self.did.append(f"start {node}")
        self.whole = True


def run(cluster):
    recorded = []

    def record(finding, act):
        recorded.append(finding)
        act()
    recovery.wait_whole(cluster, 30, lambda cond: cond, record, stale_after=0.1)
    return recorded


def test_the_app_restarted_when_start_app_returns():
    c = Split(app_hangs=False)
    recorded = run(c)
    assert c.did == ["stop_app rabbit1", "start_app rabbit1"]
    assert [r["finding"] for r in recorded] == ["stale_partition"] and recorded[0]["expected"] is True


def test_the_node_restarted_when_start_app_hangs():
    c = Split(app_hangs=True)
    recorded = run(c)
    assert c.did == ["stop_app rabbit1", "start_app rabbit1", "stop rabbit1", "start rabbit1"]
    assert [r["finding"] for r in recorded] == ["stale_partition", "start_app_hung"]
    assert "timed out" in recorded[1]["error"] and recorded[1]["node"] == "rabbit1"
    assert recorded[1]["recovery"] == "rabbit1 stopped and started (its app's start hung)"


def test_a_node_that_will_not_stop_is_the_harness_error():
    c = Split(app_hangs=True)
    c.stop = lambda node: (_ for _ in ()).throw(ClusterError(f"docker stop {node} failed"))
    with pytest.raises(ClusterError, match="docker stop rabbit1"):
        run(c)
