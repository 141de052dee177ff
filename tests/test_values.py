"""Values validated (issue 34): a broker setting's value is judged by the broker's own schema
(RabbitMQ's cuttlefish schema and policy validators, Kafka's ConfigDef), and a set-up that
leaves nothing to test (a min ISR no write can meet, a cut that separates nobody) is refused
at load time, the key named with the reason."""
from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from harness import brokers
from harness.brokers.kafka import values as kafka_values
from harness.brokers.rabbitmq import values as rabbit_values
from harness.cli import main as cli
from harness.scenario import ScenarioError, parse
from helpers import exit_of


def refused(data: dict, version: str | None = None) -> str:
    with pytest.raises(ScenarioError) as e:
        parse(data, "s.yaml", version=version, env={})
    return str(e.value)


def rabbit(**fields) -> dict:
    return {"name": "r", "broker": "rabbitmq", **fields}


def kafka(**fields) -> dict:
    return {"name": "k", "broker": "kafka", **fields}


# ---- the two examples ------------------------------------------------------------------

def test_queue_master_locator_min_master_is_refused_with_the_key_named():
    msg = refused(rabbit(cluster={"queue_master_locator": "min-master"}))
    assert "cluster.queue_master_locator: 'min-master' is not one of min-masters, client-local, random" in msg
    parse(rabbit(cluster={"queue_master_locator": "min-masters"}), env={})


def test_queue_master_locator_by_version():
    """4.x maps the legacy values to balanced and takes client-local / balanced; anything
    else would silently become client-local."""
    parse(rabbit(cluster={"queue_leader_locator": "balanced"}), version="4.0", env={})
    parse(rabbit(cluster={"queue_master_locator": "min-masters"}), version="4.0", env={})
    msg = refused(rabbit(cluster={"queue_leader_locator": "least-masters"}), version="4.3")
    assert "cluster.queue_leader_locator: 'least-masters' is not one of client-local, balanced" in msg


def test_min_insync_replicas_above_the_replication_factor_is_refused():
    msg = refused(kafka(cluster={"min.insync.replicas": 4}))
    assert "cluster.min.insync.replicas: 4 is above the 3 brokers" in msg
    msg = refused(kafka(topic={"replication_factor": 2, "config": {"min.insync.replicas": 3}}))
    assert "topic.config.min.insync.replicas: 3 is above the topic's replication factor 2" in msg
    assert "every acks=all write would fail" in msg
    msg = refused(kafka(cluster={"min.insync.replicas": 3}, topic={"replication_factor": 2}))
    assert "cluster.min.insync.replicas: 3 is above the topic's replication factor 2" in msg
    # the topic's own setting decides for the topic
    parse(kafka(cluster={"min.insync.replicas": 3}, topic={"replication_factor": 2,
                                                            "config": {"min.insync.replicas": 2}}), env={})


def test_validate_command_refuses_both_examples(tmp_path):
    bad_r = tmp_path / "r.yaml"
    bad_r.write_text("name: r\nbroker: rabbitmq\ncluster: {queue_master_locator: min-master}\n")
    bad_k = tmp_path / "k.yaml"
    bad_k.write_text("name: k\nbroker: kafka\ncluster: {min.insync.replicas: 4}\n")
    for path, key in ((bad_r, "cluster.queue_master_locator"), (bad_k, "cluster.min.insync.replicas")):
        result = CliRunner().invoke(cli, ["validate", str(path)])
        assert exit_of(result) != 0 and key in result.output, result.output


# ---- RabbitMQ: the cuttlefish schema -----------------------------------------------------------

@pytest.mark.parametrize("key, value, reason", [
    ("cluster_partition_handling", "pause_majority", "one of ignore, pause_minority, autoheal, pause_if_all_down"),
    ("collect_statistics_interval", "5s", "is not an integer"),
    ("consumer_timeout", 0, "out of range (non_zero_positive_integer"),
    ("log.console.level", "verbose", "one of debug, info"),
    ("queue_index_embed_msgs_below", "lots", "a size"),
    ("handshake_timeout", "never", "infinity or an integer"),
])
def test_rabbitmq_conf_values_are_judged_by_the_schema(key, value, reason):
    msg = refused(rabbit(cluster={key: value}))
    assert f"cluster.{key}: " in msg and reason in msg


def test_rabbitmq_typed_settings_are_judged_by_the_names_they_render_as():
    assert "cluster.net_ticktime (net_ticktime): 0 is out of range" in refused(rabbit(cluster={"net_ticktime": 0}))


def test_rabbitmq_booleans_are_written_as_the_schema_spells_them():
    sc = parse(rabbit(cluster={"reverse_dns_lookups": True}), env={})
    assert sc.cluster.extra["reverse_dns_lookups"] == "true"
    assert "reverse_dns_lookups = true" in sc.cluster.render()
    msg = refused(rabbit(cluster={"reverse_dns_lookups": "yes"}))
    assert "cluster.reverse_dns_lookups: 'yes' is not one of true, false" in msg


def test_a_name_the_version_no_longer_has_is_refused():
    msg = refused(rabbit(cluster={"cluster_formation.randomized_startup_delay_range.min": 1}), version="4.3")
    assert "cluster.cluster_formation.randomized_startup_delay_range.min: RabbitMQ 4.3 refuses to boot" in msg
    msg = refused(rabbit(cluster={"mnesia_table_loading_retry_limit": "x"}))
    assert "cluster.mnesia_table_loading_retry_limit: 'x' is not an integer" in msg


def test_the_schema_reader_follows_cuttlefish_terms():
    text = """
%% {mapping, "commented.out", "rabbit.x", [{datatype, integer}]}.
{mapping, "a.b", "rabbit.a", [{datatype, {enum, [true, false]}}]}.
{mapping, "listeners.tcp.$name", "rabbit.tcp_listeners",[
    {datatype, [integer, ip]}
]}.
{mapping, "c", "rabbit.c", [{datatype, [{atom, infinity}, integer]}, {validators, ["byte"]}]}.
{mapping, "d", "rabbit.d", [{default, "x"}]}.
"""
    conf = rabbit_values.parse_schema(text)
    assert conf == {"a.b": {"datatype": [{"enum": ["true", "false"]}]},
                    "c": {"datatype": [{"atom": "infinity"}, "integer"], "validators": ["byte"]},
                    "d": {"datatype": ["string"]},
                    "listeners.tcp.$name": {"datatype": ["integer", "ip"]}}
    assert rabbit_values.conf_problem(conf["c"], "infinity") is None
    assert "out of range" in rabbit_values.conf_problem(conf["c"], "300")


def test_committed_rabbitmq_values_cover_every_version_and_the_default_names():
    data = json.loads(rabbit_values.VALUES_FILE.read_text())["versions"]
    assert set(data) == set(brokers.get("rabbitmq").generations)
    keys = set(json.loads(brokers.get("rabbitmq").settings_model.keys_file.read_text())["broker"])
    # every schema name of the server's own tree is a name config-keys.json (the image) lists
    assert set(data["3.10"]["conf"]) <= keys and len(data["3.10"]["conf"]) > 800


# ---- RabbitMQ: policies and arguments ----------------------------------------------------------

@pytest.mark.parametrize("policy, reason", [
    ({"ha-mode": "everywhere"}, "queue.policy.ha-mode: 'everywhere' is not all, exactly or nodes"),
    ({"ha-mode": "all", "ha-params": 2}, "queue.policy.ha-params: ha-mode all takes no parameters"),
    ({"ha-mode": "exactly"}, "queue.policy.ha-params: ha-mode exactly takes an integer > 0"),
    ({"ha-mode": "exactly", "ha-params": "2"}, "ha-mode exactly takes an integer > 0, not '2'"),
    ({"ha-mode": "nodes", "ha-params": ["rabbit@rabbit9"]}, "rabbit@rabbit9 not a node of this cluster"),
    ({"ha-mode": "all", "ha-sync-mode": "auto"}, "queue.policy.ha-sync-mode: 'auto' is not one of manual, automatic"),
    ({"ha-mode": "all", "ha-promote-on-failure": "never"}, "queue.policy.ha-promote-on-failure: 'never'"),
    ({"ha-mode": "all", "delivery-limit": "5"}, "queue.policy.delivery-limit: '5' is not an integer >= 0"),
    ({"ha-mode": "all", "ha-sync-mode": "manual", "colour": "red"}, "queue.policy.colour: not a policy key"),
])
def test_mirrored_policies_are_judged_by_the_policy_validators(policy, reason):
    assert reason in refused(rabbit(queue={"type": "mirrored", "policy": policy}))


def test_valid_policies_pass():
    for policy in ({"ha-mode": "exactly", "ha-params": 2, "ha-sync-mode": "automatic"},
                   {"ha-mode": "nodes", "ha-params": ["rabbit@rabbit1", "rabbit@rabbit2"]},
                   {"ha-mode": "all", "ha-promote-on-shutdown": "when-synced", "ha-promote-on-failure": "always"}):
        parse(rabbit(queue={"type": "mirrored", "policy": policy}), env={})


def test_probe_policies_are_judged_too():
    msg = refused(rabbit(probes={"throughput": {"policies": {"none": {}, "two": {"ha-mode": "exactly"}}}}))
    assert "probes.throughput.policies.two.ha-params: ha-mode exactly takes an integer" in msg


@pytest.mark.parametrize("arguments, qtype, reason", [
    ({"x-queue-type": "classic"}, "quorum", "queue.arguments.x-queue-type: 'classic' contradicts type: quorum"),
    ({"x-max-length": -1}, "quorum", "queue.arguments.x-max-length: -1 is not an integer >= 0"),
    ({"x-overflow": "reject-publish-dlx"}, "quorum", "a quorum queue refuses it"),
    ({"x-overflow": "drop"}, "classic", "queue.arguments.x-overflow: 'drop' is not one of"),
    ({"x-max-priority": 300}, "classic", "queue.arguments.x-max-priority: 300 is above 255"),
])
def test_queue_arguments_are_judged_as_queue_declare_would(arguments, qtype, reason):
    assert reason in refused(rabbit(queue={"type": qtype, "arguments": arguments}))


# ---- Kafka: ConfigDef ------------------------------------------------------------------------------

@pytest.mark.parametrize("cluster, reason", [
    ({"unclean.leader.election.enable": "yes"}, "'unclean.leader.election.enable': 'yes' is not a boolean"),
    ({"unclean.leader.election.enable": 1}, "'unclean.leader.election.enable': 1 is not a boolean"),
    ({"min.insync.replicas": 0}, "cluster.min.insync.replicas: 0 is outside [1,...]"),
    ({"num.replica.fetchers": "two"}, "cluster.num.replica.fetchers: 'two' is not an integer (int)"),
    ({"log.flush.interval.messages": 1.5}, "cluster.log.flush.interval.messages: '1.5' is not an integer (long)"),
    ({"compression.type": "brotli"}, "cluster.compression.type: 'brotli' is not one of [uncompressed"),
    ({"default.replication.factor": 4}, "cluster.default.replication.factor: 4 is above the 3 brokers"),
])
def test_kafka_broker_configs_are_judged_by_configdef(cluster, reason):
    assert reason in refused(kafka(cluster=cluster))


@pytest.mark.parametrize("config, reason", [
    ({"unclean.leader.election.enable": "maybe"}, "topic.config.unclean.leader.election.enable: 'maybe' is not a boolean"),
    ({"min.insync.replicas": "two"}, "topic.config.min.insync.replicas: 'two' is not an integer (int)"),
    ({"cleanup.policy": "forever"}, "topic.config.cleanup.policy: 'forever' is not one of [compact, delete]"),
    ({"flush.messages": 0}, "topic.config.flush.messages: 0 is outside [1,...]"),
])
def test_kafka_topic_configs_are_judged_by_configdef(config, reason):
    assert reason in refused(kafka(topic={"config": config}))


def test_kafka_valid_values_pass_on_every_version():
    data = kafka(cluster={"unclean.leader.election.enable": True, "min.insync.replicas": 2,
                          "compression.type": "lz4", "log.flush.interval.messages": 1},
                 topic={"config": {"unclean.leader.election.enable": False, "cleanup.policy": "compact,delete"}})
    for version in brokers.get("kafka").generations:
        sc = parse(data, version=version, env={})
        assert sc.cluster.extra["compression.type"] == "lz4"


def test_kafka_combinations_that_leave_nothing_to_test():
    assert ("topic.replication_factor: 4 is above the 3 brokers"
            in refused(kafka(topic={"replication_factor": 4})))
    assert "workload.idempotence: needs acks all, not 1" in refused(kafka(workload={"idempotence": True, "acks": 1}))
    msg = refused(kafka(workload={"idempotence": True, "max_in_flight": 6}))
    assert "workload.max_in_flight: 6 with idempotence; at most 5" in msg


def test_configdef_reader():
    html = ('<h4><a id="min.insync.replicas"></a><a id="x" href="#x">min.insync.replicas</a></h4>\n<p>doc</p>'
            '<table><tbody>\n<tr><th>Type:</th><td>int</td></tr>\n<tr><th>Default:</th><td>1</td></tr>\n'
            '<tr><th>Valid Values:</th><td>[1,...]</td></tr>\n</tbody></table>\n'
            '<h4><a id="compression.level"></a></h4><table><tbody><tr><th>Type:</th><td>int</td></tr>'
            '<tr><th>Valid Values:</th><td>[1,...,9] or -1</td></tr></tbody></table>')
    got = kafka_values.parse_configdef(html)
    assert got == {"compression.level": {"type": "int", "valid": "[1,...,9] or -1"},
                   "min.insync.replicas": {"type": "int", "valid": "[1,...]"}}
    assert kafka_values.value_problem(got["compression.level"], "-1") is None
    assert "outside" in kafka_values.value_problem(got["compression.level"], "10")
    assert "not an integer" in kafka_values.value_problem(got["min.insync.replicas"], str(2**31))


def test_committed_kafka_values_are_the_key_dumps_names():
    keys = json.loads(brokers.get("kafka").settings_model.keys_file.read_text())
    for kind in ("broker", "topic"):
        assert set(kafka_values.configs("3.9", kind)) == set(keys[kind])
    assert kafka_values.configs("3.9-kraft", "broker") == kafka_values.configs("3.9", "broker")


# ---- a cut that separates nobody ---------------------------------------------------------------

@pytest.mark.parametrize("targets, reason", [
    ({"partial": ["queue_master", "queue_master"]}, "partial: both sides are 'queue_master'"),
    ({"isolate_from": ["rabbit1", "rabbit1"]}, "isolate_from: both sides are 'rabbit1'"),
    ({"isolate_from": ["queue_master", "queue_master"]}, "isolate_from: both sides are 'queue_master'"),
    ({"isolate": "all"}, "isolate: separates no node from another"),
    ({"components": [["rabbit1", "rabbit2", "rabbit3"]]}, "components: separates no node from another"),
    ({"grudge": {"rabbit1": []}}, "grudge: separates no node from another"),
    ({"grudge": {"rabbit1": ["rabbit1"]}}, "grudge: separates no node from another"),
    ({"isolate_from": [["rabbit1", "rabbit2"], "rabbit2"]}, "isolate_from: groups overlap"),
    ({"halves": "rabbit1"}, "halves: halves needs at least two nodes"),
])
def test_a_partition_that_separates_no_node_is_refused(targets, reason):
    msg = refused(rabbit(nemesis=[{"at": 1, "fault": "partition", "targets": targets, "duration": 5}]))
    assert f"nemesis: partition at 1s: targets: {reason}" in msg


def test_cuts_known_only_at_run_time_and_real_cuts_pass():
    for targets in ({"isolate": "queue_master"}, {"partial": ["rabbit1", "rabbit3"]}, "halves",
                    {"isolate_from": ["queue_master", "queue_mirrors"]}, {"grudge": {"rabbit1": ["rabbit2"]}}):
        parse(rabbit(nemesis=[{"at": 1, "fault": "partition", "targets": targets, "duration": 5}]), env={})
    # Kafka on ZooKeeper: every broker cut from ZooKeeper is a cut
    parse(kafka(nemesis=[{"at": 1, "fault": "partition", "targets": {"isolate": "brokers"}, "duration": 5}]), env={})
    msg = refused(kafka(nemesis=[{"at": 1, "fault": "loss", "targets": {"isolate": "all"}, "duration": 5,
                                  "params": {"probability": 0.5}}]))
    assert "nemesis: loss at 1s: targets: isolate: separates no node from another" in msg


# ---- the dumps from the images (docker) ---------------------------------------------------------

@pytest.mark.docker
@pytest.mark.parametrize("name", brokers.KINDS)
def test_committed_values_are_the_images_own(name):
    """The committed default version's values are what the broker in its image says:
    regenerate with ``python -m harness.brokers.<name>.values <version> --image <ref>``."""
    module = {"rabbitmq": rabbit_values, "kafka": kafka_values}[name]
    plugin = brokers.get(name)
    default = next(g.name for g in plugin.generations.values() if g.default)
    dumped = module.dump(f"{plugin.image.repo}:latest")
    committed = json.loads(module.VALUES_FILE.read_text())["versions"][default]
    for kind in ("conf",) if name == "rabbitmq" else ("broker", "topic"):
        assert set(committed[kind]) <= set(dumped[kind])
        assert all(dumped[kind][k] == v for k, v in committed[kind].items()), f"regenerate {module.VALUES_FILE}"
