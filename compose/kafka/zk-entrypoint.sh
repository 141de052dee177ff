#!/bin/sh
# mqchaos ZooKeeper entrypoint (bind-mounted): QuorumPeerMain from the Kafka image's jars.
set -eu
DATA=/var/lib/zookeeper
mkdir -p "$DATA"
printf '%s\n' "${ZOO_MY_ID:?ZOO_MY_ID must be set}" > "$DATA/myid"
CP="${ZK_CLASSPATH:-/opt/kafka/libs/*}"
# shellcheck disable=SC2086
exec java ${JVM_HEAP_OPTS:--Xmx256m} -XX:+UseSerialGC -Djava.awt.headless=true \
  -Dlog4j.configuration=file:/mqchaos/conf/log4j.properties \
  -Dzookeeper.admin.enableServer=false \
  -cp "$CP" org.apache.zookeeper.server.quorum.QuorumPeerMain /mqchaos/conf/zoo.cfg
