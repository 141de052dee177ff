"""A Kafka replica's log truncations, counted from the brokers' own lines (issue 52, item 5):
only the lines that truncate something, in 3.9's and 4.1's spellings (UnifiedLog.truncateTo:
Scala in 3.9, Java in the storage module in 4.1), as ``docker logs --timestamps`` gives them.
Not the fetcher's "Truncating partition ... due to" (logged before every attempt) nor the
"has no effect" line."""
from __future__ import annotations

from harness.brokers.kafka.observe import log_measures

STAMP = "2026-11-26T10:00:03.123456789Z "
DIR = "dir=/var/lib/kafka/data"

# 3.9 (kafka.log.UnifiedLog, Scala; log4j 1 layout "[%d] %p %m (%c)%n")
TRUNCATED_39 = (f"{STAMP}[2026-11-26 10:00:03,123] INFO [UnifiedLog partition=mqchaos-0, {DIR}] "
                "Truncating to offset 15210 (kafka.log.UnifiedLog)\n")
NO_EFFECT_39 = (f"{STAMP}[2026-11-26 10:00:03,120] INFO [UnifiedLog partition=mqchaos-0, {DIR}] "
                "Truncating to 15210 has no effect as the largest offset in the log is 15209 (kafka.log.UnifiedLog)\n")
# 4.1 (org.apache.kafka.storage.internals.log.UnifiedLog, Java; log4j 2, the same layout)
TRUNCATED_41 = (f"{STAMP}[2026-11-26 10:00:03,123] INFO [UnifiedLog partition=mqchaos-0, {DIR}] "
                "Truncating to offset 8812 (org.apache.kafka.storage.internals.log.UnifiedLog)\n")
NO_EFFECT_41 = (f"{STAMP}[2026-11-26 10:00:03,120] INFO [UnifiedLog partition=mqchaos-0, {DIR}] "
                "Truncating to 8812 has no effect as the largest offset in the log is 8811 "
                "(org.apache.kafka.storage.internals.log.UnifiedLog)\n")
# the follower's fetcher, before each attempt (AbstractFetcherThread, 3.9 and 4.1), whatever it removes
FETCHER = (f"{STAMP}[2026-11-26 10:00:03,119] INFO [ReplicaFetcher replicaId=2, leaderId=1, fetcherId=0] "
           "Truncating partition mqchaos-0 with OffsetTruncationState(offset=15210, truncationCompleted=true) "
           "due to leader epoch and offset EpochEndOffset(errorCode=0, partition=0, leaderEpoch=3, "
           "endOffset=15210) (kafka.server.ReplicaFetcherThread)\n")
# a real 4.1.1 broker's pair (K5a with the controllers apart, 2026-11-28, kafka2's log), the topic
# renamed: the fetcher's line, then UnifiedLog's that nothing was truncated
REAL_41 = ("2026-11-28T08:06:43.164177341Z [2026-11-28 08:06:43,164] INFO [ReplicaFetcher replicaId=2, leaderId=1, "
           "fetcherId=0] Truncating partition mqchaos-1 with TruncationState(offset=0, completed=true) due to local "
           "high watermark 0 (kafka.server.ReplicaFetcherThread)\n"
           "2026-11-28T08:06:43.164201396Z [2026-11-28 08:06:43,164] INFO [UnifiedLog partition=mqchaos-1, "
           "dir=/var/lib/kafka/data] Truncating to 0 has no effect as the largest offset in the log is -1 "
           "(org.apache.kafka.storage.internals.log.UnifiedLog)\n")
# the same truncation's warning when it goes below the high watermark: counted once, by UnifiedLog's line
BELOW_HW = (f"{STAMP}[2026-11-26 10:00:03,124] WARN [ReplicaFetcher replicaId=2, leaderId=1, fetcherId=0] "
            "Truncating mqchaos-0 to offset 15210 below high watermark 15400 (kafka.server.ReplicaFetcherThread)\n")


def count(text: str, node: str = "kafka2", topic: str = "mqchaos") -> int:
    return log_measures({node: text}, topic)["log_truncations"]


def test_a_line_that_truncates_counts_in_both_spellings():
    assert count(TRUNCATED_39) == 1
    assert count(TRUNCATED_41) == 1


def test_a_truncation_that_has_no_effect_does_not_count():
    assert count(FETCHER + NO_EFFECT_39) == 0
    assert count(FETCHER + NO_EFFECT_41) == 0
    assert count(REAL_41) == 0


def test_one_truncation_is_one_however_many_lines_speak_of_it():
    assert count(FETCHER + TRUNCATED_39 + BELOW_HW) == 1
    assert count(FETCHER + NO_EFFECT_41 + FETCHER + TRUNCATED_41 + BELOW_HW) == 1


def test_other_topics_and_other_nodes_do_not_count():
    health = TRUNCATED_41.replace("partition=mqchaos-0", "partition=mqchaos-health-2")
    assert count(health) == 0 and count(health, topic="mqchaos-health") == 1
    assert count(TRUNCATED_39, node="zk1") == 0
    assert count(TRUNCATED_39.replace("mqchaos-0", "mqchaos-7")) == 1  # any partition of the topic
