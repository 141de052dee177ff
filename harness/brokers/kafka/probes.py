"""Kafka probe: partition leaders per broker before and after the faults, and after a
preferred-replica election (K11)."""
from __future__ import annotations

from collections import Counter

from confluent_kafka import ElectionType, KafkaError, TopicPartition

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
            self.ctx.stop.wait(p.settle)  # the controller's own rebalance has this long
        self.measurements.update(spread_measures("leaders", "after", self._leaders()))
        if p.elect_preferred:  # the harness's hand, not the broker's: an operator event
            self.ctx.operator("preferred_election", self.cluster.brokers(), {"topic": self.sc.topic.name},
                              self._elect_preferred)
            self.measurements.update(spread_measures("leaders", "after_election", self._leaders()))

    def _leaders(self) -> dict[str, int]:
        parts = self.cluster.partitions(self.sc.topic.name)
        return spread(Counter(p["leader"] for p in parts if p["leader"]), self.cluster.brokers())

    def _elect_preferred(self) -> None:
        topic = self.sc.topic.name
        errors: dict[int, str] = {}

        def elected() -> bool:
            pending = [p for p in self.cluster.partitions(topic)
                       if p["leader"] is not None and p["leader"] != p["preferred"]]
            # Asked again until done: right after a rolling restart the client's cached
            # controller is often stale (NOT_CONTROLLER, seen on 3.9 with the kept admin
            # client), and Kafka moves a leader only to a preferred replica back in the ISR.
            ready = [TopicPartition(topic, p["partition"]) for p in pending if p["preferred"] in p["isr"]]
            if ready:
                try:
                    res = self.cluster.admin().elect_leaders(ElectionType.PREFERRED, ready).result(timeout=30)
                except Exception as e:  # noqa: BLE001 - kept as a measurement, the wait decides
                    errors[-1] = str(e)[:300]
                else:
                    for tp, err in res.items():
                        if err is not None and err.code() != KafkaError.ELECTION_NOT_NEEDED:
                            errors[tp.partition] = err.str()[:300]
            return not pending

        try:
            wait_until(elected, 60, "preferred leaders elected", interval=1.0)
        finally:
            if errors:
                self.measurements["election_errors"] = {str(k): v for k, v in sorted(errors.items())}
