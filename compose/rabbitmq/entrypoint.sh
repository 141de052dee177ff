#!/bin/sh
# mqchaos RabbitMQ entrypoint (bind-mounted). Writes the Erlang cookie explicitly and runs
# the server binary directly as the rabbitmq user: Debian's /usr/sbin/rabbitmq-server wraps
# it in `su`, which kills RabbitMQ 2 s after SIGTERM, so a graceful stop would not be one.
set -eu
HOME_DIR=/var/lib/rabbitmq
mkdir -p "$HOME_DIR" /var/log/rabbitmq
cookie="$HOME_DIR/.erlang.cookie"
rm -f "$cookie"
printf '%s' "${MQCHAOS_ERLANG_COOKIE:?MQCHAOS_ERLANG_COOKIE must be set}" > "$cookie"
chown -R rabbitmq:rabbitmq "$HOME_DIR" /var/log/rabbitmq
chmod 400 "$cookie"
# Also give root's CLI tools (docker exec rabbitmqctl) the same cookie.
cp "$cookie" /root/.erlang.cookie 2>/dev/null && chmod 400 /root/.erlang.cookie || true
unset MQCHAOS_ERLANG_COOKIE
if [ -x /usr/lib/rabbitmq/bin/rabbitmq-server ]; then
  server=/usr/lib/rabbitmq/bin/rabbitmq-server
else
  server=$(command -v rabbitmq-server)
fi
export HOME="$HOME_DIR"
# a node of a separate site (a link between two clusters) has a configuration of its own
node_conf="/mqchaos/conf/rabbitmq.$(cat /etc/hostname).conf"
if [ -f "$node_conf" ]; then
  export RABBITMQ_CONFIG_FILE="$node_conf"
fi
# the feature flags a new node starts with (settings feature_flags_on_init; the required ones always)
if [ -f /mqchaos/conf/feature_flags ]; then
  RABBITMQ_FEATURE_FLAGS="$(cat /mqchaos/conf/feature_flags)"
  export RABBITMQ_FEATURE_FLAGS
fi
# fs: lazy (a power-loss scenario): the mnesia base through the file system that forgets
# unsynced writes (mounted after the chown above, which must not walk through it)
if [ -n "${MQCHAOS_LAZYFS:-}" ]; then
  mkdir -p "$MQCHAOS_LAZYFS" && chown rabbitmq:rabbitmq "$MQCHAOS_LAZYFS"
  python3 /mqchaos/lazyfs.py start "$MQCHAOS_LAZYFS"
fi
exec setpriv --reuid=rabbitmq --regid=rabbitmq --init-groups "$server"
