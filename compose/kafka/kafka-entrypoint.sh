#!/bin/sh
# mqchaos Kafka broker entrypoint (bind-mounted): kafka.Kafka with the per-run properties
# rendered by harness/brokers/kafka/cluster.py. java runs as PID 1, so SIGTERM (docker stop)
# triggers Kafka's controlled shutdown.
# A controller (the run's conf has a cluster-id; its properties a controller role: a KRaft
# cluster's combined nodes, a migration's ctrl1..3): the storage is formatted first;
# --ignore-formatted leaves a formatted one alone, so only a new or wiped node is formatted
# (with a static quorum a wiped node then rejoins as a voter with an empty log:
# harness/brokers/kafka/kraft.py). A KRaft broker beside dedicated controllers
# (process.roles=broker, harness/brokers/kafka/controllers.py) is formatted too when its storage
# has no meta.properties yet (new or wiped); a migrated broker (process.roles=broker) keeps the
# storage it had on ZooKeeper, its meta.properties, as KIP-866 has it.
# Kafka 4.x logs through log4j 2 (its image has log4j-core), 3.9 through reload4j: the run's
# conf has both files, so a node upgraded in place reads the one its image needs.
set -eu
mkdir -p /var/lib/kafka/data
# fs: lazy (a power-loss scenario): log.dirs through the file system that forgets unsynced writes
[ -z "${MQCHAOS_LAZYFS:-}" ] || python3 /mqchaos/lazyfs.py start "$MQCHAOS_LAZYFS"
CP="${KAFKA_CLASSPATH:-/opt/kafka/libs/*}"
PROPS="/mqchaos/conf/${KAFKA_NODE:?KAFKA_NODE must be set}.properties"
if ls /opt/kafka/libs/log4j-core-*.jar >/dev/null 2>&1; then
  LOGGING="-Dlog4j2.configurationFile=/mqchaos/conf/log4j2.properties"
else
  LOGGING="-Dlog4j.configuration=file:/mqchaos/conf/log4j.properties"
fi
if [ -f /mqchaos/conf/cluster-id ] && { grep -q '^process.roles=.*controller' "$PROPS" ||
    { grep -q '^process.roles=broker$' "$PROPS" && [ ! -f /var/lib/kafka/data/meta.properties ]; }; }; then
  java -Xmx256m $LOGGING -cp "$CP" kafka.tools.StorageTool format \
    --cluster-id="$(cat /mqchaos/conf/cluster-id)" --config "$PROPS" --ignore-formatted
fi
# shellcheck disable=SC2086
exec java ${JVM_HEAP_OPTS:--Xmx512m} -XX:+UseG1GC -XX:MaxGCPauseMillis=20 \
  -XX:+ExplicitGCInvokesConcurrent -Djava.awt.headless=true $LOGGING \
  -cp "$CP" kafka.Kafka "$PROPS"
