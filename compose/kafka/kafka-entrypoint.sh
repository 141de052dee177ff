#!/bin/sh
# mqchaos Kafka broker entrypoint (bind-mounted): kafka.Kafka (ZooKeeper mode) with the
# per-run properties rendered by harness/brokers/kafka/cluster.py. java runs as PID 1, so SIGTERM
# (docker stop) triggers Kafka's controlled shutdown.
set -eu
mkdir -p /var/lib/kafka/data
# fs: lazy (a power-loss scenario): log.dirs through the file system that forgets unsynced writes
[ -z "${MQCHAOS_LAZYFS:-}" ] || python3 /mqchaos/lazyfs.py start "$MQCHAOS_LAZYFS"
CP="${KAFKA_CLASSPATH:-/opt/kafka/libs/*}"
# shellcheck disable=SC2086
exec java ${JVM_HEAP_OPTS:--Xmx512m} -XX:+UseG1GC -XX:MaxGCPauseMillis=20 \
  -XX:+ExplicitGCInvokesConcurrent -Djava.awt.headless=true \
  -Dlog4j.configuration=file:/mqchaos/conf/log4j.properties \
  -cp "$CP" kafka.Kafka "/mqchaos/conf/${KAFKA_NODE:?KAFKA_NODE must be set}.properties"
