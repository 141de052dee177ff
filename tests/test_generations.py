"""Broker generations (issue 16): the one rule choosing a version, images per version, and
what RabbitMQ 4.x no longer has (rendering, not-applicable claims, capabilities). No Docker:
nothing here builds, pulls or starts anything."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from harness import brokers, images, rows, store
from harness.brokers.generations import choose_version, image_ref, version_env
from harness.scenario import ScenarioError, load, parse, parse_recorded, versions_option
from harness.verdicts import EXIT_UNKNOWN, NOT_APPLICABLE, undecided

ROOT = Path(__file__).resolve().parent.parent
SCENARIOS = sorted((ROOT / "scenarios").glob("*.yaml"))
RABBIT, KAFKA = brokers.get("rabbitmq"), brokers.get("kafka")


def quorum(**kw) -> dict:
    return {"name": "q", "broker": "rabbitmq", "queue": {"type": "quorum"}, **kw}


def mirrored(**kw) -> dict:
    return {"name": "m", "broker": "rabbitmq", "queue": {"type": "mirrored", "policy": {"ha-mode": "all"}}, **kw}


# ---- the one rule -------------------------------------------------------------------------

def test_each_broker_has_its_generations_and_one_default():
    assert list(RABBIT.generations) == ["3.10", "4.0", "4.3"]
    assert list(KAFKA.generations) == ["3.9", "3.9-kraft", "4.1"]
    for plugin in (RABBIT, KAFKA):
        assert [g.name for g in plugin.generations.values() if g.default] == [plugin.generation().name]
    assert RABBIT.generation().name == "3.10" and KAFKA.generation().name == "3.9"


@pytest.mark.parametrize("cli, scenario, env, expected", [
    (None, None, None, ("3.10", "default")),
    (None, None, "4.3", ("4.3", "env")),
    (None, "4.0", "4.3", ("4.0", "scenario")),
    ("4.3", "4.0", "3.10", ("4.3", "cli")),
    ("4.0", None, None, ("4.0", "cli")),
    (None, 4.0, None, ("4.0", "scenario")),   # YAML's number
])
def test_cli_over_scenario_over_env_over_default(cli, scenario, env, expected):
    environ = {version_env("rabbitmq"): env} if env else {}
    assert RABBIT.version(cli=cli, scenario=scenario, env=environ) == expected


def test_an_unknown_version_names_where_it_came_from_and_the_versions_there_are():
    with pytest.raises(ValueError, match=r"--version: '5\.0' is not a rabbitmq version .*one of 3\.10, 4\.0, 4\.3"):
        RABBIT.version(cli="5.0", env={})
    with pytest.raises(ValueError, match="MQCHAOS_KAFKA_VERSION: '2.8'"):
        KAFKA.version(env={"MQCHAOS_KAFKA_VERSION": "2.8"})
    # YAML reads 3.10 as 3.1: the error says what to write
    with pytest.raises(ValueError, match=r'version: 3\.1 .*quote it \(version: "3\.10"\)'):
        choose_version("rabbitmq", RABBIT.generations, scenario=3.1, env={})


def test_the_scenario_carries_the_version_it_runs_and_where_it_came_from():
    sc = parse(quorum(), env={})
    assert (sc.version, sc.version_source, sc.cluster.version) == ("3.10", "default", "3.10")
    sc = parse(quorum(version="4.0"), env={version_env("rabbitmq"): "4.3"})
    assert (sc.version, sc.version_source, sc.cluster.version) == ("4.0", "scenario", "4.0")
    sc = parse(quorum(version="4.0"), version="4.3", env={})
    assert (sc.version, sc.version_source) == ("4.3", "cli")
    sc = parse(quorum(), env={version_env("rabbitmq"): "4.3"})
    assert (sc.version, sc.version_source) == ("4.3", "env")
    # by broker, as a batch passes it
    sc = parse(quorum(), version={"kafka": "4.1"}, env={})
    assert sc.version == "3.10"
    # the dump (run.json params) holds the version once, at the top, and parses back
    dumped = sc.model_dump(mode="json")
    assert dumped["version"] == "3.10" and "version" not in dumped["cluster"]
    assert parse(dumped, env={}) == sc


def test_a_bad_version_in_a_file_is_refused_at_load_time(tmp_path):
    f = tmp_path / "s.yaml"
    f.write_text("name: s\nbroker: rabbitmq\nversion: 3.10\n")
    with pytest.raises(ScenarioError, match=r's.yaml: invalid scenario\n  version: 3\.1 is not a rabbitmq version'):
        load(f)
    f.write_text("name: s\nbroker: rabbitmq\nversion: \"3.10\"\n")
    assert load(f).version == "3.10"
    with pytest.raises(ScenarioError, match="cluster.version: the version is the scenario's own field"):
        parse(quorum(cluster={"version": "4.0"}), env={})


def test_a_recorded_run_keeps_its_version_whatever_the_environment(monkeypatch):
    monkeypatch.setenv(version_env("rabbitmq"), "4.3")
    old = quorum()  # recorded before generations: no version at all
    assert parse_recorded(old).version == "3.10"
    assert parse_recorded(quorum(version="4.0")).version == "4.0"


def test_version_options_by_broker():
    assert versions_option(("4.0",)) == {"rabbitmq": "4.0"}
    assert versions_option(("3.9",)) == {"kafka": "3.9"}
    assert versions_option(("rabbitmq=4.3", "kafka=4.1")) == {"rabbitmq": "4.3", "kafka": "4.1"}
    with pytest.raises(ValueError, match="no broker has this version"):
        versions_option(("9.9",))
    with pytest.raises(ValueError, match="'4.1' is not a rabbitmq version"):
        versions_option(("rabbitmq=4.1",))
    with pytest.raises(ValueError, match="two versions for rabbitmq"):
        versions_option(("4.0", "rabbitmq=4.3"))


# ---- images per version ----------------------------------------------------------------------

def test_image_tags_keep_todays_for_the_default_version():
    spec = RABBIT.image
    assert spec.ref(RABBIT.generation("3.10")) == "mqchaos/rabbitmq:latest"
    assert spec.ref(RABBIT.generation("3.10"), "abc") == "mqchaos/rabbitmq:abc"
    assert spec.ref(RABBIT.generation("4.0"), "abc") == "mqchaos/rabbitmq:4.0-abc"
    assert spec.ref(RABBIT.generation("4.3")) == "mqchaos/rabbitmq:4.3"
    # KRaft mode on 3.9 runs 3.9's image
    assert image_ref("mqchaos/kafka", KAFKA.generation("3.9-kraft")) == "mqchaos/kafka:latest"
    assert KAFKA.image.ref(KAFKA.generation("4.1")) == "mqchaos/kafka:4.1"


def test_one_build_per_image():
    assert [g.name for g in images.images_to_build("kafka", ["3.9", "3.9-kraft"])] == ["3.9"]
    assert [g.name for g in images.images_to_build("kafka", ["3.9-kraft", "4.1"])] == ["3.9", "4.1"]
    assert [g.name for g in images.images_to_build("rabbitmq", None)] == ["3.10"]


@pytest.mark.parametrize("plugin", [RABBIT, KAFKA], ids=lambda p: p.name)
def test_every_build_argument_is_an_arg_of_the_dockerfile(plugin):
    dockerfile = (ROOT / "compose" / plugin.image.context / "Dockerfile").read_text()
    declared = set(re.findall(r"^ARG (\w+)", dockerfile, re.M))
    assert re.search(r"^ARG BASE_IMAGE=.*\nFROM \$\{BASE_IMAGE\}", dockerfile, re.M)
    for g in plugin.generations.values():
        assert {k for k, _ in g.build_args} <= declared, g.name
        for k, _ in g.build_args:
            assert "${" + k + "}" in dockerfile, k  # and used


def test_the_build_command_passes_the_suite_base_and_labels_the_version(tmp_path):
    g = RABBIT.generation("4.3")
    cmd = images.build_command("mqchaos/rabbitmq:4.3-abc", "abc", g, tmp_path)
    assert cmd[:2] == ["docker", "build"] and cmd[-1] == str(tmp_path)
    pairs = [cmd[i + 1] for i, a in enumerate(cmd) if a == "--build-arg"]
    assert "BASE_IMAGE=debian:forky-slim" in pairs and "RABBITMQ_PACKAGE=rabbitmq-server=4.3.6-1" in pairs
    assert "FUSE_PACKAGES=" in pairs  # forky has no python3-fusepy
    assert "mqchaos.version=4.3" in cmd
    assert images.build_command("r", "d", RABBIT.generation("3.10"), tmp_path).count(
        "BASE_IMAGE=" + images.BASE_TAG) == 1


def test_the_inputs_hash_differs_by_generation():
    spec = RABBIT.image
    hashes = {images.inputs_hash(spec, "sha256:base", g) for g in RABBIT.generations.values()}
    assert len(hashes) == 3
    kraft, zk = KAFKA.generation("3.9-kraft"), KAFKA.generation("3.9")
    assert images.inputs_hash(KAFKA.image, "b", kraft) == images.inputs_hash(KAFKA.image, "b", zk)


def test_base_images_per_suite(monkeypatch, tmp_path):
    assert images.base_tag("trixie") == "debian:trixie-slim"
    assert images.base_tag("bookworm") == images.BASE_TAG
    assert "trixie-security" in images.sources_list("trixie")
    assert images.sources_list("forky").strip() == f"deb {images.MIRROR} forky main"
    monkeypatch.setattr(images, "DEBOOTSTRAP_SCRIPTS", tmp_path)  # an old debootstrap: no forky script
    cmd = images.debootstrap_command("forky", tmp_path / "rootfs")
    assert cmd[:3] == ["debootstrap", "--variant=minbase", "forky"] and cmd[-1] == str(tmp_path / "sid")
    (tmp_path / "forky").write_text("")
    assert images.debootstrap_command("forky", tmp_path / "rootfs")[-1] == images.MIRROR


def test_the_kafka_jars_come_from_the_generations_pom():
    from harness.brokers.kafka import mvn_command

    cmd = mvn_command(KAFKA.generation("4.1"), Path("/tmp/libs"))
    assert cmd[cmd.index("-f") + 1].endswith("compose/kafka/pom-4.xml") and "-Dkafka.version=4.1.1" in cmd
    cmd = mvn_command(KAFKA.generation("3.9"), Path("/tmp/libs"))
    assert cmd[cmd.index("-f") + 1].endswith("compose/kafka/pom.xml") and "-Dkafka.version=3.9.1" in cmd
    artifacts = re.findall(r"<artifactId>([^<]+)</artifactId>", (ROOT / "compose/kafka/pom-4.xml").read_text())
    assert "log4j-slf4j-impl" in artifacts and not any("reload4j" in a or "zookeeper" in a for a in artifacts)


def test_the_cluster_runs_its_versions_image_unless_the_environment_names_one(monkeypatch):
    monkeypatch.delenv("RABBITMQ_IMAGE", raising=False)
    c = RABBIT.cluster()
    c.config = RABBIT.settings({})
    assert c.compose_env()["RABBITMQ_IMAGE"] == "mqchaos/rabbitmq:latest"
    c.config.version = "4.0"
    assert c.compose_env()["RABBITMQ_IMAGE"] == "mqchaos/rabbitmq:4.0"
    monkeypatch.setenv("RABBITMQ_IMAGE", "rabbitmq:4.0-management")  # an official image
    assert c.compose_env()["RABBITMQ_IMAGE"] == "rabbitmq:4.0-management"
    k = KAFKA.cluster()
    k.config.version = "4.1"
    monkeypatch.delenv("KAFKA_IMAGE", raising=False)
    monkeypatch.delenv("ZOOKEEPER_IMAGE", raising=False)
    env = k.compose_env()
    assert env["KAFKA_IMAGE"] == env["ZOOKEEPER_IMAGE"] == "mqchaos/kafka:4.1"


# ---- RabbitMQ 4.x ---------------------------------------------------------------------------

def test_43_renders_no_partition_handling():
    for version, present in (("3.10", True), ("4.0", True), ("4.3", False)):
        cfg = RABBIT.settings({"partition_handling": "pause_if_all_down", "pause_if_all_down_nodes": "rabbit1",
                               "cluster_partition_handling.pause_if_all_down.recover": "autoheal"})
        cfg.version = version
        text = cfg.render()
        assert ("cluster_partition_handling" in text) is present, version
        assert "net_ticktime = 10" in text and "disk_free_limit.absolute = 50MB" in text
    cfg = RABBIT.settings({})
    lines = cfg.render().splitlines()  # today's order: the mode before net_ticktime
    assert lines.index("cluster_partition_handling = ignore") + 1 == lines.index("net_ticktime = 10")


def _mirroring_files() -> list[Path]:
    return [p for p in SCENARIOS if "rabbitmq" in p.read_text()
            and ("type: mirrored" in p.read_text() or "ha-mode" in p.read_text())]


@pytest.mark.parametrize("version", ["4.0", "4.3"])
def test_every_mirrored_row_is_not_applicable_on_4x(version):
    files = _mirroring_files()
    assert len(files) >= 18
    for path in files:
        sc = load(path, version)
        assert sc.not_applicable() == "classic mirrored queues were removed in 4.0", path.name
        assert load(path, "3.10").not_applicable() is None


def test_quorum_rows_apply_on_4x_and_partition_claims_do_not_on_43():
    sc = parse(quorum(cluster={"partition_handling": "pause_minority"}, expect={"lost": 0}), env={})
    for version in ("3.10", "4.0", "4.3"):
        sc = parse(quorum(cluster={"partition_handling": "pause_minority"}, expect={"lost": 0}), version=version, env={})
        assert sc.not_applicable() is None, version
    claim = quorum(cluster={"partition_handling": "pause_minority"}, expect={"paused_count": 1})
    assert parse(claim, version="4.0", env={}).not_applicable() is None
    assert "4.3 has no partition handling" in parse(claim, version="4.3", env={}).not_applicable()


def test_a_key_the_version_refuses_to_boot_with_is_refused_at_load_time():
    bad = quorum(cluster={"extra": {"classic_queue.default_version": "1"}})
    assert parse(bad, version="3.10", env={}).cluster.extra == {"classic_queue.default_version": "1"}
    with pytest.raises(ScenarioError, match="cluster.classic_queue.default_version: RabbitMQ 4.0 refuses to boot"):
        parse(bad, version="4.0", env={})


def test_43_cannot_lose_power():
    q6 = next(p for p in SCENARIOS if p.name.startswith("Q6a"))
    assert load(q6, "4.0").cluster.fs == "lazy"
    with pytest.raises(ScenarioError, match="needs power_loss, which rabbitmq 4.3 nodes cannot do"):
        load(q6, "4.3")
    assert "power_loss" not in RABBIT.capabilities_of("4.3") and "power_loss" in RABBIT.capabilities_of("4.0")


def test_quorum_delivery_limit_by_version_and_argument():
    assert parse(quorum(), version="3.10", env={}).delivery_limit() == -1
    assert parse(quorum(), version="4.0", env={}).delivery_limit() == 20
    assert parse(quorum(), version="4.3", env={}).delivery_limit() == 20
    sc = parse(quorum(queue={"type": "quorum", "arguments": {"x-delivery-limit": -1}}), version="4.0", env={})
    assert sc.delivery_limit() == -1
    assert "delivery_limit" in sc.measurement_names()
    assert RABBIT.measure(sc, [], {}, [], [], None)["delivery_limit"] == -1
    with pytest.raises(ScenarioError, match="x-delivery-limit: quorum queues only"):
        parse({"name": "c", "broker": "rabbitmq", "queue": {"type": "classic", "arguments": {"x-delivery-limit": 5}}},
              env={})
    with pytest.raises(ScenarioError, match="x-delivery-limit: an integer"):
        parse(quorum(queue={"type": "quorum", "arguments": {"x-delivery-limit": "20"}}), env={})


def test_43_reports_no_partitions_without_asking(monkeypatch):
    c = RABBIT.cluster()
    c.config = RABBIT.settings({})
    c.config.version = "4.3"
    monkeypatch.setattr(c, "node_images", lambda: {})  # no containers to ask
    monkeypatch.setattr(c, "exec", lambda *a, **k: pytest.fail("4.3 has no rabbit_node_monitor:partitions()"))
    assert not c.reports_partitions() and c.partitions() == {}
    monkeypatch.setattr(c, "node_images", lambda: {n: {"image": "x", "version": "3.10"} for n in c.nodes()})
    assert c.running_version() == "3.10" and c.reports_partitions()  # what the containers run wins


# ---- not applicable: a verdict, not a crash ----------------------------------------------------

def test_a_not_applicable_run_brings_nothing_up_and_is_undecided(tmp_path, monkeypatch):
    from harness.batch.summary import Entry, row, rows_from_runs
    from harness.runner import Run

    sc = parse(mirrored(id="R1", expect={"lost": 0}), version="4.0", env={})
    for method in ("up", "down", "_compose_up"):
        monkeypatch.setattr(RABBIT.cluster_class(), method,
                            lambda *a, **k: pytest.fail("no cluster for a claim 4.0 lacks"))
    run = Run(sc, results=tmp_path)
    run.prepare()
    assert run._prepared is None
    assert run.execute() == EXIT_UNKNOWN
    info = store.read_run(run.dir)
    assert info["status"] == NOT_APPLICABLE and info["version"] == {"version": "4.0", "from": "cli"}
    assert info["params"]["version"] == "4.0"
    check = store.read_check(run.dir)
    why = "not applicable: classic mirrored queues were removed in 4.0"
    assert check["valid"] is None and check["prediction"] == {"held": None, "reason": why, "checks": []}
    assert undecided(info, []) == [why]
    # in a batch's table: undecided, not a harness error, with its reason
    r = row(Entry(sc, 0, run=run, code=EXIT_UNKNOWN))
    assert r["harness_error"] is False and r["reason"] == why and rows.verdict_text(r) == "not applicable"
    assert "<skipped message=" in rows.junit([r]) and why in rows.junit([r])
    assert "not applicable" in "\n".join(rows.table_lines([r]))
    again = rows_from_runs([run.dir])
    assert again[0]["harness_error"] is False and again[0]["reason"] == why


def test_mqchaos_run_and_validate_say_not_applicable(tmp_path, monkeypatch):
    from harness.cli import main

    monkeypatch.setenv(store.RESULTS_ENV, str(tmp_path))
    r1 = next(p for p in SCENARIOS if p.name.startswith("R1-"))
    res = CliRunner().invoke(main, ["validate", "--version", "4.0", str(r1)])
    assert res.exit_code == 0 and "(rabbitmq 4.0): not applicable: classic mirrored queues" in res.output
    res = CliRunner().invoke(main, ["run", "--version", "rabbitmq=4.0", str(r1)])
    assert res.exit_code == EXIT_UNKNOWN, res.output
    info = json.loads(next(tmp_path.glob("*/*/run.json")).read_text())
    assert info["status"] == NOT_APPLICABLE
    res = CliRunner().invoke(main, ["validate", "--version", "9.9", str(r1)])
    assert res.exit_code == 2 and "no broker has this version" in res.output


def test_mqchaos_up_checks_the_version_before_touching_docker(monkeypatch):
    from harness import cluster_cli
    from harness.cli import main

    def no(*a, **k):
        pytest.fail("must not reach Docker")
    monkeypatch.setattr(cluster_cli, "ensure_engine", no)
    monkeypatch.setattr(cluster_cli, "ensure_images", no)
    res = CliRunner().invoke(main, ["cluster", "up", "rabbitmq", "--version", "4.1"])
    assert res.exit_code == 2 and "'4.1' is not a rabbitmq version" in res.output
    res = CliRunner().invoke(main, ["cluster", "up", "rabbitmq", "--set", "version=4.0"])
    assert res.exit_code == 2 and "the version is --version" in res.output
    assert cluster_cli._image_versions(["kafka"], ("all",)) == {"kafka": ["3.9", "3.9-kraft", "4.1"]}
    monkeypatch.setenv(version_env("rabbitmq"), "4.3")
    assert cluster_cli._image_versions(["rabbitmq", "kafka"], ()) == {"rabbitmq": ["4.3"], "kafka": ["3.9"]}


# ---- Kafka in KRaft mode: the pure parts (the cluster: harness/brokers/kafka/tests/test_kraft.py) ---

def _props(text: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in text.splitlines() if line and not line.startswith("#"))


def test_kraft_nodes_are_combined_voters_with_an_advertised_controller_listener():
    cfg = KAFKA.settings({"min.insync.replicas": 2})
    zk = _props(cfg.properties("kafka2"))
    assert zk["broker.id"] == "2" and "zookeeper.connect" in zk and "process.roles" not in zk  # today's
    for version in ("3.9-kraft", "4.1"):
        cfg.version = version
        p = _props(cfg.properties("kafka2"))
        assert p["process.roles"] == "broker,controller" and p["node.id"] == "2" and "broker.id" not in p
        assert p["controller.quorum.voters"] == "1@kafka1:19093,2@kafka2:19093,3@kafka3:19093"
        assert p["controller.listener.names"] == "CONTROLLER"
        assert p["listeners"].endswith(",CONTROLLER://0.0.0.0:19093")
        assert p["advertised.listeners"] == ("INTERNAL://kafka2:19092,EXTERNAL://127.0.0.1:9093,"
                                             "CONTROLLER://kafka2:19093")
        assert p["listener.security.protocol.map"].endswith(",CONTROLLER:PLAINTEXT")
        assert not any(k.startswith("zookeeper.") for k in p) and p["min.insync.replicas"] == "2"
        # the controller port clashes with no node's EXTERNAL port
        assert "19093" not in {u.rsplit(":", 1)[1] for u in p["advertised.listeners"].split(",")[:2]}


def test_kraft_conf_has_a_cluster_id_and_both_logging_files(tmp_path, monkeypatch):
    import harness.brokers.compose as compose

    monkeypatch.setattr(compose, "STATE_DIR", tmp_path)
    k = KAFKA.cluster()
    for version, cid in (("3.9", False), ("3.9-kraft", True), ("4.1", True)):
        cfg = KAFKA.settings({})
        cfg.version = version
        k.write_config(cfg)
        conf = k.conf_dir()
        # both: a node upgraded in place (3.9-kraft -> 4.1) reads the file its image needs
        assert (conf / "cluster-id").exists() is cid, version
        assert (conf / "log4j2.properties").exists() and (conf / "log4j.properties").exists(), version
        if cid:
            text = (conf / "cluster-id").read_text().strip()
            assert len(text) == 22 and not text.startswith("-") and re.fullmatch(r"[A-Za-z0-9_-]+", text)
    assert "rootLogger.appenderRef.stdout.ref=STDOUT" in (k.conf_dir() / "log4j2.properties").read_text()
    entry = (ROOT / "compose/kafka/kafka-entrypoint.sh").read_text()
    assert "kafka.tools.StorageTool format" in entry and "--ignore-formatted" in entry
    assert "-Dlog4j2.configurationFile=/mqchaos/conf/log4j2.properties" in entry
    assert "ls /opt/kafka/libs/log4j-core-*.jar" in entry  # chosen by the image, not the conf


def test_the_quorum_state_file_and_the_status_command_name_the_active_controller():
    from harness.brokers.kafka import kraft

    v0 = ('{"clusterId":"","leaderId":2,"leaderEpoch":7,"votedId":-1,"appliedOffset":0,'
          '"currentVoters":[{"voterId":1},{"voterId":2},{"voterId":3}],"data_version":0}')
    assert kraft.quorum_state(v0) == {"leader": "kafka2", "epoch": 7, "voted": None,
                                      "voters": ["kafka1", "kafka2", "kafka3"]}
    v1 = '{"leaderId":-1,"leaderEpoch":8,"votedId":3,"votedDirectoryId":"AAAAAAAAAAAAAAAAAAAAAA","data_version":1}'
    assert kraft.quorum_state(v1) == {"leader": None, "epoch": 8, "voted": "kafka3", "voters": None}
    status = """ClusterId:              3pJ2aRrzQz6qpo4w4gZT1Q
LeaderId:               3
LeaderEpoch:            12
HighWatermark:          1234
MaxFollowerLag:         0
MaxFollowerLagTimeMs:   0
CurrentVoters:          [{"id": 1, "directoryId": null, "endpoints": ["CONTROLLER://kafka1:19093"]}, {"id": 2, "directoryId": null, "endpoints": ["CONTROLLER://kafka2:19093"]}, {"id": 3, "directoryId": null, "endpoints": ["CONTROLLER://kafka3:19093"]}]
CurrentObservers:       []
"""
    assert kraft.quorum_status(status) == {"leader": "kafka3", "epoch": 12, "high_watermark": 1234,
                                           "voters": ["kafka1", "kafka2", "kafka3"], "observers": []}
    with pytest.raises(ValueError, match="not a quorum status"):
        kraft.quorum_status("Error: timed out")
    cmd = kraft.quorum_status_command("kafka1")
    assert cmd[cmd.index("--bootstrap-controller") + 1] == "kafka1:19093" and cmd[-2:] == ["describe", "--status"]


def test_kraft_versions_load_a_scenario_that_does_not_need_zookeeper():
    k3 = next(p for p in SCENARIOS if p.name.startswith("K3-"))
    assert load(k3, "3.9").version == "3.9"
    assert load(k3, "4.1").version == "4.1" and load(k3, "3.9-kraft").cluster.version == "3.9-kraft"


def test_the_kraft_compose_file_has_the_brokers_only():
    import yaml

    kraft = yaml.safe_load((ROOT / "compose/kafka-kraft.yml").read_text())
    zk = yaml.safe_load((ROOT / "compose/kafka.yml").read_text())
    assert sorted(kraft["services"]) == ["kafka1", "kafka2", "kafka3"]
    for node, svc in kraft["services"].items():
        assert svc["networks"] == zk["services"][node]["networks"] and svc["ports"] == zk["services"][node]["ports"]
    assert kraft["networks"] == zk["networks"]


def test_metadata_measures_separate_answered_refused_kept_and_lost():
    from harness.brokers.rabbitmq.probes import METADATA_PREFIX, metadata_measures
    writes = {"rabbit1": {"ok": True, "s": 1.2, "master": "rabbit1", "mirrors": ["rabbit2"]},
              "rabbit2": {"ok": True, "s": 0.4},
              "rabbit3": {"ok": False, "error": "no answer in 45 s", "s": 45}}
    # rabbit1's answered declare is gone after the heal (Mnesia's restarted minority)
    m = metadata_measures(writes, {f"{METADATA_PREFIX}rabbit2", "mqchaos"})
    assert m["metadata_write_ok"] == ["rabbit1", "rabbit2"]
    assert m["metadata_write_failed"] == ["rabbit3"]
    assert m["metadata_kept"] == ["rabbit2"] and m["metadata_lost"] == ["rabbit1"]
    assert m["metadata_write_s"] == {"rabbit1": 1.2, "rabbit2": 0.4, "rabbit3": 45}
    assert m["metadata_write_max_s"] == 45 and metadata_measures({}, set())["metadata_write_max_s"] is None
    # where each answered declare put its queue (R45: none of the policy's nodes up); unknown: None
    assert m["metadata_masters"] == {"rabbit1": "rabbit1", "rabbit2": None}
    assert m["metadata_on_own_node"] == ["rabbit1"]
    assert m["metadata_mirrored"] is None  # rabbit2's mirrors were not read: unknown
    both = {n: dict(w, mirrors=[]) for n, w in writes.items()}
    both["rabbit1"]["mirrors"] = ["rabbit3"]
    assert metadata_measures(both, set())["metadata_mirrored"] == ["rabbit1"]
    # a refused write that exists anyway (committed after the client gave up) is neither kept nor lost
    m = metadata_measures(writes, {f"{METADATA_PREFIX}{n}" for n in ("rabbit1", "rabbit2", "rabbit3")})
    assert m["metadata_kept"] == ["rabbit1", "rabbit2"] and m["metadata_lost"] == []


def test_quorum_partition_rows_run_on_every_rabbitmq_version():
    from harness.scenario import load
    for path in sorted((ROOT / "scenarios").glob("R*q-*.yaml")):
        for version in ("3.10", "4.0", "4.3"):
            sc = load(path)
            sc.version = version
            assert sc.queue.type == "quorum" and sc.not_applicable() is None, (path.name, version)
            assert sc.probes.metadata is not None


def test_4x_nodes_wait_for_the_seed_3_10_does_not():
    from harness.brokers.rabbitmq.cluster import RabbitConfig

    def limit(version):
        conf = RabbitConfig(version=version).render("rabbit2")
        return int(next(line for line in conf.splitlines() if "discovery_retry_limit" in line).split("=")[1])
    assert limit("3.10") == 2 and limit("4.0") == limit("4.3") == 60
