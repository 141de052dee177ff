"""Kafka probe: partition leaders per broker before and after the faults, and after a
preferred-replica election (K11)."""
from __future__ import annotations

from collections import Counter

from confluent_kafka import ElectionType, TopicPartition

from harness.probes import Probes, spread, spread_measures
from harness.util import wait_until


class KafkaProbes(Probes):
    def before_faults(self) -> None:
        if self.sc.probes.leaders:
            self.measurements.update(spread_measures("leaders", "before", self._leaders()))

    def after_heal(self) -> None:
        p = self.sc.probes.leaders
        if not p:
            return
        if p.settle:
            self.run.stop_all.wait(p.settle)  # the controller's own rebalance has this long
        self.measurements.update(spread_measures("leaders", "after", self._leaders()))
        if p.elect_preferred:
            self._elect_preferred()
            self.measurements.update(spread_measures("leaders", "after_election", self._leaders()))

    def _leaders(self) -> dict[str, int]:
        parts = self.cluster.partitions(self.sc.topic.name)
        return spread(Counter(p["leader"] for p in parts if p["leader"]), self.cluster.brokers())

    def _elect_preferred(self) -> None:
        topic = self.sc.topic.name
        tps = [TopicPartition(topic, p["partition"]) for p in self.cluster.partitions(topic)]
        try:
            self.cluster.admin().elect_leaders(ElectionType.PREFERRED, tps).result(timeout=30)
        except Exception as e:  # noqa: BLE001 - "already the preferred leader" is an error there
            self.measurements["election_error"] = str(e)[:300]
        wait_until(lambda: all(p["leader"] == p["preferred"] or p["leader"] is None
                               for p in self.cluster.partitions(topic)), 60, "preferred leaders elected")
