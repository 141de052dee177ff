"""The history's typed schemas (explicit: Spark never infers them).

docs/history.md is the human-readable contract; this is the machine one. What the checker
makes of them (check.json) has its schema in harness.results (CheckResult), below the
prediction language that reads it.
"""
from pyspark.sql import types as T

CORRUPT = "_corrupt"

PRODUCE = T.StructType([
    T.StructField("msg_id", T.StringType()),
    T.StructField("producer", T.StringType()),
    T.StructField("seq", T.LongType()),
    T.StructField("outcome", T.StringType()),
    T.StructField("t_invoke", T.DoubleType()),
    T.StructField("t_complete", T.DoubleType()),
    T.StructField("node", T.StringType()),
    T.StructField("error", T.StringType()),
    # a message the consumers will not take (a "poison" message: rejected until the broker's
    # delivery limit drops or dead-letters it)
    T.StructField("poison", T.BooleanType()),
    # where an acknowledged write went, when the broker says (history version 3): the
    # partition ("topic:partition", as a delivery's source) and its offset
    T.StructField("source", T.StringType()),
    T.StructField("offset", T.LongType()),
    # a transactional producer's message (harness/brokers/kafka/txn.py): its transaction, when
    # its commit (or abort) was asked for, and whether it was aborted
    T.StructField("txn", T.StringType()),
    T.StructField("t_commit", T.DoubleType()),
    T.StructField("aborted", T.BooleanType()),
    # a processor's output (consume-transform-produce): the input message it came from
    T.StructField("from_msg", T.StringType()),
])

CONSUME = T.StructType([
    T.StructField("msg_id", T.StringType()),
    T.StructField("consumer", T.StringType()),
    T.StructField("t", T.DoubleType()),
    T.StructField("redelivered", T.BooleanType()),
    T.StructField("source", T.StringType()),
    T.StructField("offset", T.LongType()),
    T.StructField("node", T.StringType()),
    T.StructField("producer", T.StringType()),
    T.StructField("seq", T.LongType()),
    # handed back to the broker (reject / nack with requeue): seen, not consumed
    T.StructField("rejected", T.BooleanType()),
    # read from a dead-letter queue: the broker dead-lettered the message
    T.StructField("dead_lettered", T.BooleanType()),
    # a poison message the consumer stopped rejecting and took (a bounded number of rejects)
    T.StructField("gave_up", T.BooleanType()),
    # the reader assigned its partitions itself (true, the default) or subscribed (false: a
    # rebalance may move it back, so a step back is no anomaly)
    T.StructField("assigned", T.BooleanType()),
    # a read made inside a transaction (a processor's: checkers.cycles)
    T.StructField("txn", T.StringType()),
])

# history/replica-<node>.jsonl: each record one replica's log holds, read from its files after
# the drain (harness/brokers/kafka/segments.py): what lost-on-node compares with the writes
REPLICA = T.StructType([
    T.StructField("msg_id", T.StringType()),
    T.StructField("node", T.StringType()),
    T.StructField("source", T.StringType()),
    T.StructField("offset", T.LongType()),
    T.StructField("producer", T.StringType()),
    T.StructField("seq", T.LongType()),
])

# A line missing any of these (or mistyping any field) cannot be checked: it
# is counted in malformed_lines and skipped.
PRODUCE_REQUIRED = ("msg_id", "producer", "seq", "outcome", "t_invoke")
CONSUME_REQUIRED = ("msg_id", "consumer", "t", "redelivered")
OUTCOMES = ("ok", "fail", "info")
# History version 2: written before the send; a completion (an outcome above) follows,
# unless the run died first. Only completions need t_complete.
INVOKE = "invoke"

# The Parquet copy of the produce log keeps each record's place in the JSONL
# (file, then Spark's row id, increasing along a file): the copy is bucketed
# by msg_id, and "a message's writer is its first record" needs file order.
POS = "_pos"
POS_TYPE = T.StructType([T.StructField("file", T.StringType()), T.StructField("row", T.LongType())])
COPY = {"produce": T.StructType(PRODUCE.fields + [T.StructField(POS, POS_TYPE)]), "consume": CONSUME}

REPLICA_REQUIRED = ("msg_id", "node", "source", "offset")
KINDS = {"produce": (PRODUCE, PRODUCE_REQUIRED), "consume": (CONSUME, CONSUME_REQUIRED),
         "replica": (REPLICA, REPLICA_REQUIRED)}


def with_corrupt(schema: T.StructType) -> T.StructType:
    return T.StructType(schema.fields + [T.StructField(CORRUPT, T.StringType())])
