"""RabbitMQ's nodes (rabbit1..3): their names, published ports, and the Erlang node names
(``rabbit@rabbit2``) the broker's own records use."""
from __future__ import annotations

NODES = ["rabbit1", "rabbit2", "rabbit3"]

AMQP_PORTS = {"rabbit1": 5672, "rabbit2": 5673, "rabbit3": 5674}
MGMT_PORTS = {"rabbit1": 15672, "rabbit2": 15673, "rabbit3": 15674}
# Queue types whose management entry names a `leader`, its `members` and those `online`
# (quorum queues; streams: the stream coordinator's writer and its replicas).
REPLICATED = ("quorum", "stream")


def erlang_node(node: str) -> str:
    return node if "@" in node else f"rabbit@{node}"


def short_node(erl: str | None) -> str | None:
    return erl.split("@", 1)[1] if erl and "@" in erl else erl
