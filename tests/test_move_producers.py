"""move_producers (issue 39): an operator's change to the clients, not the cluster. Pure: fake
producers that move (or not) when asked; the step's evidence says whether every one publishes
through a target node, and a broker whose producers cannot move is refused at planning."""
import random
import threading

import pytest

from nemesis import faults as F
from nemesis.targets import TargetError


class Producer:
    """Moves at once when ``follows``; else stays where it is."""

    def __init__(self, name: str, node: str, follows: bool = True):
        self.name, self.node, self.follows, self.moves = name, node, follows, []

    def move_to(self, nodes):
        self.moves.append({"to": sorted(nodes), "from": self.node})
        if self.follows:
            self.node = nodes[0]

    def serving_on(self):
        return self.node


class Fixed:
    """A producer without move_to (a broker whose clients cannot be redeployed)."""
    name = "k0"


class Cluster:
    def nodes(self):
        return ["rabbit1", "rabbit2", "rabbit3"]

    def node_names(self):
        return self.nodes()


def ctx(producers):
    return F.Ctx(Cluster(), random.Random(1), lambda: 12.5, "q", lambda: producers)


def run_step(producers, targets=("rabbit3",)):
    c = ctx(producers)
    f = F.Fault("f1", "move_producers", [])
    F.FAULT_TYPES["move_producers"].plan(c, f, list(targets), {})
    F.execute(c, f, {"timeout": 0.5})
    return f


def test_every_producer_through_a_target_node_is_the_evidence():
    ps = [Producer("p0", "rabbit1"), Producer("p1", "rabbit2")]
    f = run_step(ps)
    assert f.instant and f.targets == ["rabbit3"]
    assert f.details["before"] == {"p0": "rabbit1", "p1": "rabbit2"}
    assert f.details["evidence"]["after"] == {"p0": "rabbit3", "p1": "rabbit3"}
    assert f.details["effective"] is True
    assert f.details["evidence"]["moves"]["p1"] == {"to": ["rabbit3"], "from": "rabbit2"}


def test_a_producer_that_stays_makes_the_step_ineffective():
    f = run_step([Producer("p0", "rabbit1"), Producer("p1", "rabbit2", follows=False)])
    assert f.details["evidence"]["after"] == {"p0": "rabbit3", "p1": "rabbit2"}
    assert f.details["effective"] is False


def test_producers_that_cannot_move_are_refused_when_planned():
    with pytest.raises(TargetError, match="cannot be moved .*k0"):
        run_step([Producer("p0", "rabbit1"), Fixed()])
    with pytest.raises(TargetError, match="no producers"):
        F.FAULT_TYPES["move_producers"].plan(F.Ctx(Cluster(), random.Random(1), lambda: 0.0, "q"),
                                             F.Fault("f1", "move_producers", []), ["rabbit3"], {})


def test_a_publisher_moves_only_after_its_window_is_settled():
    """RabbitPublisher.move_to: no endpoint on the targets is an error; asked, it serves nowhere
    until its work loop has taken the new endpoints (a session on them)."""
    from harness.brokers.rabbitmq.clients import Endpoint, RabbitPublisher
    from harness.history import RunClock

    class Writer:
        def write(self, rec):
            pass

        def close(self):
            pass
    eps = [Endpoint("rabbit1", "127.0.0.1", 5672), Endpoint("rabbit3", "127.0.0.1", 5674)]
    p = RabbitPublisher("p0", eps, "q", Writer(), RunClock(), threading.Event())
    with pytest.raises(ValueError, match="no endpoint on"):
        p.move_to(["rabbit2"])
    p.move_to(["rabbit3"])
    assert p.serving_on() is None and p.moves[-1]["to"] == ["rabbit3"]
    assert [e.node for e in p._moving] == ["rabbit3"]
