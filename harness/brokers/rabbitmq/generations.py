"""The RabbitMQ versions the harness runs, each from one Debian suite's own package, and
what each one no longer has (docs/generations-research.md, part B).

- 3.10: bookworm's rabbitmq-server 3.10.8 (today's image, the default).
- 4.0: trixie's 4.0.5 (Erlang 27). No classic mirrored queues: ha-* policies are refused.
- 4.3: forky's 4.3.6 (Erlang 29). No mirrored queues; no partition handling and no
  rabbit_node_monitor:partitions() (Khepri is the only metadata store); x-queue-master-locator
  denied; no power-loss file system (forky has neither python3-fusepy nor libfuse2t64); a
  requeueing reject no longer counts toward a quorum queue's delivery limit.

forky is Debian's testing suite: its package is pinned, so an image is the version it
says or fails to build. trixie renamed libfuse2 to libfuse2t64.
"""
from __future__ import annotations

from harness.brokers.generations import Generation, named_generation
from harness.brokers.protocol import POWER_LOSS

# Features of RabbitMQ the plug-in uses (``Generation.lacks`` names those a version lacks).
MIRRORED_QUEUES = "mirrored_queues"                  # classic queue mirroring (ha-* policies)
PARTITION_HANDLING = "partition_handling"            # cluster_partition_handling acts (Mnesia)
NODE_MONITOR_PARTITIONS = "node_monitor_partitions"  # rabbit_node_monitor:partitions() exists
QUEUE_MASTER_LOCATOR = "queue_master_locator"        # x-queue-master-locator is accepted
# peer discovery picks one seed node among peers started together (3.13+); 3.10 nodes started
# at once can form separate clusters, while a 4.x node started alone looks for its absent
# peers for about a minute before it boots standalone
SEED_DISCOVERY = "seed_discovery"
# a quorum queue counts a consumer's basic.nack(requeue) toward its delivery limit: 3.x and
# 4.0-4.2 count every return; 4.3 counts only failed deliveries and re-reads basic.reject
# (requeue) as one, so a nack is free and a reject still counts (rabbitmq-server#15387,
# discussion #18226; measured: D1b with basic.reject on 4.3.6 dropped all 44 poison messages
# after 20 redeliveries each)
NACK_COUNTS = "nack_counts"
# a node may join as a RAM node (cluster_formation.node_type = ram): Mnesia's; deprecated from
# 3.13 (the deprecated feature ram_node_type), and Khepri has none
RAM_NODES = "ram_nodes"

MIRRORING_REMOVED = "classic mirrored queues were removed in 4.0"
PARTITION_HANDLING_GONE = ("4.3 has no partition handling: Khepri is its only metadata store and "
                           "cluster_partition_handling is ignored")
RAM_NODES_GONE = "RAM nodes are deprecated from 3.13 (ram_node_type) and Khepri has none"
NACKS_FREE = ("4.3 counts only failed deliveries toward a quorum queue's delivery limit: "
              "a basic.nack with requeue is free (a basic.reject still counts)")

GENERATIONS = {g.name: g for g in (
    Generation("3.10", "bookworm", (("SUITE", "bookworm"), ("RABBITMQ_PACKAGE", "rabbitmq-server"),
                                    ("FUSE_PACKAGES", "python3-fusepy libfuse2")),
               lacks=frozenset({SEED_DISCOVERY}), default=True),
    Generation("4.0", "trixie", (("SUITE", "trixie"), ("RABBITMQ_PACKAGE", "rabbitmq-server=4.0.5-6+deb13u2"),
                                 ("FUSE_PACKAGES", "python3-fusepy libfuse2t64")),
               lacks=frozenset({MIRRORED_QUEUES, RAM_NODES})),
    Generation("4.3", "forky", (("SUITE", "forky"), ("RABBITMQ_PACKAGE", "rabbitmq-server=4.3.6-1"),
                                ("FUSE_PACKAGES", "")),
               lacks=frozenset({MIRRORED_QUEUES, PARTITION_HANDLING, NODE_MONITOR_PARTITIONS,
                                QUEUE_MASTER_LOCATOR, POWER_LOSS, NACK_COUNTS, RAM_NODES})),
)}

# A quorum queue's delivery limit when neither x-delivery-limit nor a policy sets one
# (None: unlimited). 4.0 made it 20, counting every return (requeue, consumer gone): over it a
# message is dead-lettered, or dropped when there is no dead-letter exchange (4.0.1 notes).
DELIVERY_LIMIT_DEFAULT = {"3.10": None, "4.0": 20, "4.3": 20}

# rabbitmq.conf keys a version refuses to boot with (4.0.1 release notes), by prefix.
REFUSED_KEYS = {
    "4.0": ("classic_queue.default_version", "cluster_formation.randomized_startup_delay_range"),
    "4.3": ("classic_queue.default_version", "cluster_formation.randomized_startup_delay_range"),
}


def generation(version: str | None) -> Generation:
    """The generation named ``version`` (None: the default, 3.10)."""
    return named_generation(GENERATIONS, version)


def has(version: str | None, feature: str) -> bool:
    return generation(version).has(feature)


__all__ = ["DELIVERY_LIMIT_DEFAULT", "GENERATIONS", "MIRRORED_QUEUES", "MIRRORING_REMOVED", "NODE_MONITOR_PARTITIONS",
           "PARTITION_HANDLING", "PARTITION_HANDLING_GONE", "QUEUE_MASTER_LOCATOR", "REFUSED_KEYS", "NACKS_FREE",
           "NACK_COUNTS", "RAM_NODES", "RAM_NODES_GONE", "SEED_DISCOVERY", "generation", "has"]
