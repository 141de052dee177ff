"""The Kafka versions the harness runs (docs/generations-research.md, part A).

- 3.9: Kafka 3.9.1 with a ZooKeeper ensemble (today's image, the default), bookworm's JRE 17.
- 3.9-kraft: the same image in KRaft mode: three combined broker+controller nodes, no ZooKeeper;
  its static quorum cannot be made dynamic (no KIP-853 voter changes: it lacks
  ``quorum_membership``, which its topology's class offers).
- 4.1: Kafka 4.1.1 (KRaft only; log4j 2; Java 17+: trixie's JRE 21, as trixie has no 17).
"""
from __future__ import annotations

from harness.brokers.generations import Generation, named_generation
from harness.brokers.capabilities import QUORUM_MEMBERSHIP

# Features of Kafka the plug-in uses (``Generation.lacks`` names those a version lacks, and
# the capabilities its topology's class offers but the version cannot: a ZooKeeper version's
# class has no quorum membership, a KRaft version's no migration, by their components).
ZOOKEEPER = "zookeeper"   # the cluster metadata lives in a ZooKeeper ensemble (zk1..3)
LOG4J1 = "log4j1"         # the broker logs through log4j 1 (reload4j): log4j.properties
ELR = "elr"               # KIP-966 eligible leader replicas, on by default on a new cluster (4.1)

GENERATIONS = {g.name: g for g in (
    Generation("3.9", "bookworm", (("SUITE", "bookworm"), ("JRE_PACKAGE", "openjdk-17-jre-headless"),
                                   ("KAFKA_VERSION", "3.9.1"), ("FUSE_PACKAGES", "python3-fusepy libfuse2")),
               lacks=frozenset({ELR}), default=True),
    Generation("3.9-kraft", "bookworm", (("SUITE", "bookworm"), ("JRE_PACKAGE", "openjdk-17-jre-headless"),
                                         ("KAFKA_VERSION", "3.9.1"), ("FUSE_PACKAGES", "python3-fusepy libfuse2")),
               lacks=frozenset({ZOOKEEPER, ELR, QUORUM_MEMBERSHIP}), tag=""),
    Generation("4.1", "trixie", (("SUITE", "trixie"), ("JRE_PACKAGE", "openjdk-21-jre-headless"),
                                 ("KAFKA_VERSION", "4.1.1"), ("FUSE_PACKAGES", "python3-fusepy libfuse2t64")),
               lacks=frozenset({ZOOKEEPER, LOG4J1})),
)}


def generation(version: str | None) -> Generation:
    """The generation named ``version`` (None: the default, 3.9 with ZooKeeper)."""
    return named_generation(GENERATIONS, version)


def has(version: str | None, feature: str) -> bool:
    return generation(version).has(feature)


def pom(g: Generation) -> str:
    """The Maven file that resolves the generation's jars (compose/kafka/): 4.x has no
    ZooKeeper and no log4j 1 binding, so its own."""
    return "pom.xml" if g.has(LOG4J1) else "pom-4.xml"


__all__ = ["ELR", "GENERATIONS", "LOG4J1", "ZOOKEEPER", "generation", "has", "pom"]
