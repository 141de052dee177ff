"""harness.brokers.rabbitmq.cluster.boot_failed: a running node whose broker's last boot
failed (Q1 on 3.10.8: a node resuming after a pause_minority pause hit BOOT FAILED and
waited with its broker stopped until the heal timed out, 180 s later; R9: a resuming
node's boot hung, logging nothing for 3 minutes)."""
from datetime import datetime, timezone

from harness.brokers.rabbitmq.cluster import boot_failed

TS = "2026-11-23T17:11:05.668764822Z "
BOOT = [" Starting RabbitMQ 3.10.8 on Erlang 25.2.3 [jit]", "Running boot step pre_boot defined by app rabbit"]
DONE = ["Server startup complete; 3 plugins started."]
FAILED = ["", "BOOT FAILED", "===========", "Error during startup: {error,",
          "{rabbitmq_management_agent,", "{{shutdown,", "{failed_to_start_child,rabbit_mgmt_agent_sup,"]
PAUSED = ["Cluster minority/secondary status detected - awaiting recovery",
          "Stopping RabbitMQ applications and their dependencies in the following order:"]


def log(*parts, ts=True):
    return "\n".join((TS if ts else "") + line for part in parts for line in part)


def test_a_boot_that_failed_last_is_reported_with_its_error():
    why = boot_failed(log(BOOT, DONE, PAUSED, BOOT, FAILED))
    assert why.startswith("BOOT FAILED: Error during startup: {error, {rabbitmq_management_agent,")
    assert "=====" not in why


def test_without_docker_timestamps_too():
    assert boot_failed(log(BOOT, FAILED, ts=False)).startswith("BOOT FAILED: Error during startup")


def test_a_node_that_booted_or_is_paused_or_booting_again_has_not_failed():
    assert boot_failed(log(BOOT, DONE)) is None
    assert boot_failed(log(BOOT, DONE, PAUSED)) is None          # paused: waits for the majority
    assert boot_failed(log(BOOT, FAILED, BOOT)) is None          # a new boot started since
    assert boot_failed(log(BOOT, FAILED, BOOT, DONE)) is None
    assert boot_failed(log(PAUSED)) is None                      # no boot in the tail: no evidence
    assert boot_failed("") is None


def _stamped(lines, start):
    """Docker-timestamped lines one second apart from ``start`` (a Unix time)."""
    out = []
    for i, line in enumerate(lines):
        t = datetime.fromtimestamp(start + i, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f") + "123Z"
        out.append(f"{t} {line}")
    return "\n".join(out)


def test_a_boot_silent_for_a_minute_is_hung_and_a_quieter_one_is_not():
    hung = ["Starting RabbitMQ 3.10.8 on Erlang 25.2.3 [jit]", "Running boot step database defined by app rabbit",
            "Faking nodedown/nodeup between rabbit@rabbit3 and rabbit@rabbit1"]
    log = _stamped(hung, 1_000_000.0)  # last line at 1,000,002
    assert boot_failed(log, now=1_000_002 + 59) is None
    why = boot_failed(log, now=1_000_002 + 61)
    assert why.startswith("boot hung: started, then nothing logged for 61s") and "Faking nodedown" in why
    assert boot_failed(log) is None  # no clock given: only a failed boot is evidence
    assert boot_failed(_stamped(hung + DONE, 1_000_000.0), now=1_000_000 + 3600) is None
