"""Issue 39's version operations: ``upgrade`` (a rolling image swap, data kept) and
``finalize`` (the feature level raised), proven by what the nodes report of themselves; the
plug-ins' parsers of their tools' answers; the compose override that keeps an upgraded node
on its new image."""
import json

import pytest

from nemesis import faults, kinds

from fakes import FakeRabbit
from harness import brokers
from harness.brokers.capabilities import Versions, ability
from harness.brokers.kafka import kraft
from harness.brokers.rabbitmq import ctl
from harness.history import RunClock
from nemesis.core import Nemesis
from harness.util import same_release


class VersionedRabbit(FakeRabbit):
    """FakeRabbit whose nodes run a version, swapped by upgrade_node; ``refuse``: the new
    version's node never reports it (a node that did not come back on it)."""
    generations = {"4.0": None, "4.3": None}

    def __init__(self, tmp_path, refuse=False, level_stays=False):
        super().__init__(tmp_path)
        self.version = {n: "4.0.5" for n in self.nodes()}
        self.refuse, self.level_stays = refuse, level_stays
        self.flags = {"quorum_queue": "enabled", "rabbitmq_4.0.0": "disabled"}

    def upgrade_reason(self, version):
        return None if version in self.generations else f"no version {version!r}"

    def stop(self, node, timeout=60):
        self.calls.append(("stop", node))
        self.state[node] = "exited"

    def upgrade_node(self, node, version):
        assert self.state[node] == "exited", "an upgrade swaps the image of a stopped node"
        self.calls.append(("upgrade", node, version))
        self.state[node] = "running"
        if not self.refuse:
            self.version[node] = {"4.3": "4.3.6"}[version]

    def wait_rejoined(self, node, timeout):
        self.calls.append(("rejoined", node))

    def node_version(self, node):
        return self.version[node] if self.running(node) else None

    def features(self):
        return dict(self.flags)

    def finalize_features(self, params):
        if not self.level_stays:
            self.flags = {k: "enabled" for k in self.flags} | {"metadata.version": "4.1-IV1"}
        return {k: "enabled" for k in self.flags} | {"metadata.version": "4.1-"}  # a level's start


def test_a_rolling_upgrade_moves_each_node_in_turn_and_the_nodes_say_so(tmp_path):
    c = VersionedRabbit(tmp_path)
    with Nemesis(c, tmp_path, clock=RunClock(), settle=0, handle_signals=False) as nem:
        f = nem.apply("upgrade", ["rabbit1", "rabbit2", "rabbit3"], version="4.3")
    order = [x for x in c.calls if x[0] in ("stop", "upgrade", "rejoined")]
    assert order == [(op, n, *rest) for n in ("rabbit1", "rabbit2", "rabbit3")
                     for op, *rest in (("stop",), ("upgrade", "4.3"), ("rejoined",))]
    assert f.details["reported_before"] == {n: "4.0.5" for n in c.nodes()}
    assert f.details["evidence"]["reported_after"] == {n: "4.3.6" for n in c.nodes()}
    assert f.details["effective"] is True and not nem.active_faults()
    assert [s["node"] for s in f.details["sequence"]] == c.nodes()


def test_a_node_that_does_not_report_the_new_version_makes_the_upgrade_ineffective(tmp_path):
    c = VersionedRabbit(tmp_path, refuse=True)
    with Nemesis(c, tmp_path, clock=RunClock(), settle=0, handle_signals=False) as nem:
        f = nem.apply("upgrade", "rabbit2", version="4.3")
    assert f.details["evidence"]["reported_after"] == {"rabbit2": "4.0.5"} and f.details["effective"] is False


def test_an_upgrade_to_a_version_the_plugin_lacks_is_refused_before_it_acts(tmp_path):
    c = VersionedRabbit(tmp_path)
    with Nemesis(c, tmp_path, clock=RunClock(), settle=0, handle_signals=False) as nem:
        for params, error in (({"version": "9.9"}, "no version '9.9'"), ({}, "params.version")):
            with pytest.raises(Exception, match=error):
                nem.apply("upgrade", "rabbit1", **params)
    assert not [x for x in c.calls if x[0] in ("stop", "upgrade")]


def test_finalize_is_proved_by_the_levels_it_changed(tmp_path):
    c = VersionedRabbit(tmp_path)
    with Nemesis(c, tmp_path, clock=RunClock(), settle=0, handle_signals=False) as nem:
        f = nem.apply("finalize")
    assert f.details["effective"] is True and f.targets == []
    assert f.details["evidence"]["changed"] == {"rabbitmq_4.0.0": ["disabled", "enabled"],
                                                "metadata.version": [None, "4.1-IV1"]}
    stays = VersionedRabbit(tmp_path, level_stays=True)
    with Nemesis(stays, tmp_path / "s", clock=RunClock(), settle=0, handle_signals=False) as nem:
        f = nem.apply("finalize", timeout=0.2)
    assert f.details["effective"] is False  # the tool answered, the level stayed


class RefusingFirst(VersionedRabbit):
    """A broker that refuses the feature change ``refusals`` times (a voter unreachable),
    then takes it."""

    def __init__(self, tmp_path, refusals):
        super().__init__(tmp_path)
        self.refusals = refusals

    def finalize_features(self, params):
        if self.refusals:
            self.refusals -= 1
            raise RuntimeError("Invalid upgrade of kraft.version: not all of the voters support it")
        return super().finalize_features(params)


def test_finalize_asks_again_within_retry_s_and_keeps_each_refusal(tmp_path, monkeypatch):
    monkeypatch.setattr(kinds.time, "sleep", lambda s: None)  # the pause between asks
    c = RefusingFirst(tmp_path, refusals=2)
    with Nemesis(c, tmp_path, clock=RunClock(), settle=0, handle_signals=False) as nem:
        f = nem.apply("finalize", retry_s=60)
    assert f.details["effective"] is True and len(f.details["refused"]) == 2
    assert "not all of the voters" in f.details["refused"][0]["error"]
    once = RefusingFirst(tmp_path, refusals=1)  # without retry_s, asked once: the refusal is the step's error
    with Nemesis(once, tmp_path / "o", clock=RunClock(), settle=0, handle_signals=False) as nem:
        with pytest.raises(RuntimeError, match="voters"):
            nem.apply("finalize")


def test_same_release_reads_the_nodes_own_version_strings():
    assert same_release("4.1.1", "4.1") and same_release("3.9.1", "3.9-kraft") and same_release("4.3.6", "4.3")
    assert not same_release("4.10.0", "4.1") and not same_release(None, "4.1") and not same_release("3.9.1", "4.1")


def test_kafka_tools_answers_are_parsed():
    text = ("SLF4J: noise\nFeature: kraft.version\tSupportedMinVersion: 0\tSupportedMaxVersion: 1\t"
            "FinalizedVersionLevel: 0\tEpoch: 7\nFeature: metadata.version\tSupportedMinVersion: 3.3-IV3\t"
            "SupportedMaxVersion: 4.1-IV1\tFinalizedVersionLevel: 3.9-IV0\tEpoch: 7\n")
    assert kraft.parse_features(text) == {"kraft.version": "0", "metadata.version": "3.9-IV0"}
    log = ("[2026] INFO Kafka version: 3.9.1 (org.apache.kafka.common.utils.AppInfoParser)\n"
           "[2026] INFO Kafka version: 4.1.1 (org.apache.kafka.common.utils.AppInfoParser)\n")
    assert kraft.reported_version(log) == "4.1.1" and kraft.reported_version("nothing") is None
    cmd = kraft.feature_command("kafka1:9091", "upgrade", "--release-version", "4.1")
    assert cmd[-3:] == ["upgrade", "--release-version", "4.1"] and kraft.FEATURE_COMMAND in cmd


def test_rabbitmq_tools_answers_are_parsed():
    class Answers:
        def exec(self, node, cmd, check=True, timeout=60):
            return 0, "Asking node rabbit@rabbit1 for its RabbitMQ version...\n4.3.6\n"

        def rabbitmqctl(self, node, *args, timeout=60):
            return 0, json.dumps([{"name": "khepri_db", "state": "disabled", "stability": "experimental"}])
    assert ctl.server_version(Answers(), "rabbit1") == "4.3.6"
    assert ctl.feature_flags(Answers(), "rabbit1")[0]["name"] == "khepri_db"


def test_kafka_upgrades_stay_in_their_metadata_mode():
    kafka = brokers.get("kafka")

    def reason(version, to):  # the version's cluster's Versions component (kafka/operations.py)
        return ability(kafka.cluster(version=version), Versions).upgrade_reason(to)
    assert reason("3.9-kraft", "4.1") is None
    assert "not a ZooKeeper version" in reason("3.9", "4.1")
    assert "not a KRaft version" in reason("4.1", "3.9")
    assert "no version" in reason("4.1", "5.0")


def test_an_upgraded_node_keeps_its_image_in_every_later_compose_call(tmp_path, monkeypatch):
    import harness.brokers.compose as compose

    monkeypatch.setattr(compose, "STATE_DIR", tmp_path)
    c = brokers.get("rabbitmq").cluster(version="4.0")
    seen = []
    monkeypatch.setattr(compose, "run", lambda cmd, **kw: seen.append(cmd))
    versions = ability(c, Versions)  # the generic image swap (compose.ImageVersions)
    versions.upgrade_node("rabbit2", "4.3")
    versions.upgrade_node("rabbit1", "4.3")
    data = json.loads(c.image_override().read_text())
    assert set(data["services"]) == {"rabbit1", "rabbit2"}
    assert data["services"]["rabbit2"]["image"].startswith("mqchaos/rabbitmq:4.3")
    last = seen[-1]
    assert str(c.image_override()) in last and last[-1] == "rabbit1" and "--no-deps" in last
    c.compose("ps")  # any later call reads the override too
    assert str(c.image_override()) in seen[-1]


def test_kafka_membership_is_a_reassignment_of_the_partitions_replicas(monkeypatch):
    c = brokers.get("kafka").cluster(version="4.1")
    ran = []
    monkeypatch.setattr(c, "partitions", lambda topic: [{"leader": "kafka1", "replicas": ["kafka1", "kafka2", "kafka3"],
                                                         "isr": ["kafka1", "kafka2", "kafka3"]}])
    monkeypatch.setattr(c, "running", lambda node: True)
    monkeypatch.setattr(c, "exec", lambda node, cmd, check=True, timeout=60: ran.append((node, cmd)) or (0, ""))
    from harness.brokers.capabilities import Membership

    members = ability(c, Membership)  # the partition's replicas (kafka/operations.py's KafkaMembership)
    assert members.members("t") == ["kafka1", "kafka2", "kafka3"]
    members.change_member("remove", "kafka1", "t/0")
    (at, write), (_, tool) = ran
    assert at == "kafka2"  # never the node that loses its replica
    plan = json.loads(write[-1].split("'")[3])
    assert plan["partitions"] == [{"topic": "t", "partition": 0, "replicas": [2, 3]}]
    assert tool[-1] == "--execute" and kraft.REASSIGN_COMMAND in tool


def test_a_published_row_keeps_the_operations_evidence_and_not_the_faults(tmp_path):
    from harness import rows, store

    run = tmp_path / "U3" / "2026-11-26T00-00-00.000Z"
    run.mkdir(parents=True)
    lines = [{"fault": "partition", "targets": ["kafka1"], "t_start": 1, "t_end": 2, "details": {"effective": True}},
             {"fault": "upgrade", "targets": ["kafka1"], "t_start": 3, "t_end": 20, "details": {
                 "version": "4.1", "reported_before": {"kafka1": "3.9.1"}, "spec": "kafka1", "effective": True,
                 "evidence": {"reported_after": {"kafka1": "4.1.1"}}}}]
    (run / store.NEMESIS_LOG).write_text("".join(json.dumps(x) + "\n" for x in lines))
    ops = rows.operations(run)
    assert [o["fault"] for o in ops] == ["upgrade"] and "spec" not in ops[0]
    assert ops[0]["reported_before"] == {"kafka1": "3.9.1"} and ops[0]["evidence"]["reported_after"] == {"kafka1": "4.1.1"}
    # beside them, where each fault fell, and the seconds with only failed writes while each was on
    store.write_check(run, {"unavailable": [[1.5, 4.0], [19.0, 25.0]]})
    found = rows._evidence(run)
    assert [(o["fault"], o["unavailable_s"]) for o in found["operations"]] == [("upgrade", 2.0)]
    assert found["faults"] == [{"fault": "partition", "targets": ["kafka1"], "t_start": 1, "t_end": 2,
                                "effective": True, "unavailable_s": 0.5}]
    assert rows.overlap_s(3, None, [[1, 9]]) is None  # a step that never ended


def test_controller_changes_are_membership_of_the_quorum(tmp_path):
    class QuorumRabbit(VersionedRabbit):  # a fake whose metadata quorum can lose and gain voters
        held = ["rabbit1", "rabbit2", "rabbit3"]

        def voters(self):
            return list(self.held)

        def change_voter(self, op, node):
            self.calls.append((op, node, "voters"))
            self.held = [v for v in self.held if v != node] + ([node] if op == "add" else [])
    c = QuorumRabbit(tmp_path)
    with Nemesis(c, tmp_path, clock=RunClock(), settle=0, handle_signals=False, subject="q") as nem:
        r = nem.apply("remove_controller", "rabbit3")
        a = nem.apply("add_controller", "rabbit3")
    assert ("remove", "rabbit3", "voters") in c.calls and ("add", "rabbit3", "voters") in c.calls
    assert r.details["evidence"]["members_after"] == ["rabbit1", "rabbit2"] and r.details["effective"]
    assert sorted(a.details["evidence"]["members_after"]) == c.nodes() and a.details["effective"]


def test_the_voters_directory_ids_are_read_from_the_quorum_status():
    text = ('ClusterId: x\nLeaderId: 1\nLeaderEpoch: 3\nHighWatermark: 9\nCurrentVoters: [{"id": 1, "directoryId": '
            '"AAA", "endpoints": ["CONTROLLER://kafka1:19093"]}, {"id": 3, "directoryId": "CCC", "endpoints": []}]\n'
            'CurrentObservers: []\n')
    assert kraft.voter_directories(text) == {"kafka1": "AAA", "kafka3": "CCC"}
    assert kraft.quorum_status(text)["voters"] == ["kafka1", "kafka3"]
    assert kraft.voter_directories("CurrentVoters: [1,2,3]") == {}
    cmd = kraft.controller_command("kafka2", "remove-controller", "--controller-id", "3")
    assert "--bootstrap-controller" in cmd and "kafka2:19093" in cmd and cmd[-3:] == ["remove-controller",
                                                                                     "--controller-id", "3"]


def test_kafka_features_are_asked_of_the_next_broker_when_one_cannot_answer(monkeypatch):
    from harness.brokers.protocol import ClusterError

    c = brokers.get("kafka").cluster(version="4.1")
    asked = []

    def exec_(node, cmd, check=True, timeout=60):
        asked.append(node)
        if node == "kafka1":  # cut from the controllers
            raise ClusterError("exec on kafka1 failed (1): TimeoutException")
        return 0, "Feature: metadata.version\tSupportedMinVersion: 3.3-IV3\tFinalizedVersionLevel: 4.1-IV1\tEpoch: 3\n"
    monkeypatch.setattr(c, "running", lambda node: True)
    monkeypatch.setattr(c, "exec", exec_)
    from harness.brokers.capabilities import Features

    assert ability(c, Features).features() == {"metadata.version": "4.1-IV1"} and asked == ["kafka1", "kafka2"]


class SyncingRabbit(VersionedRabbit):
    """A fake whose queue has an unsynchronised mirror until the sync command has run
    ``steps`` looks; ``cancel`` stops it where it is."""
    def __init__(self, tmp_path, steps=2):
        super().__init__(tmp_path)
        self.state_seq, self.steps, self.looks = "idle", steps, 0

    def sync_subject(self, op, subject):
        self.calls.append((op, subject))
        self.state_seq = "syncing" if op == "sync" else "cancelled"

    def sync_state(self, subject):
        self.looks += 1
        if self.state_seq == "syncing" and self.looks > self.steps:
            self.state_seq = "done"
        return {"syncing": self.state_seq == "syncing", "state": self.state_seq,
                "unsynchronised": [] if self.state_seq == "done" else ["rabbit3"]}


def test_the_sync_commands_are_proved_by_where_the_mirrors_stand(tmp_path):
    c = SyncingRabbit(tmp_path, steps=10)
    with Nemesis(c, tmp_path, clock=RunClock(), settle=0, handle_signals=False, subject="q") as nem:
        s = nem.apply("sync_queue")
        x = nem.apply("cancel_sync")
    assert ("sync", "q") in c.calls and ("cancel", "q") in c.calls
    assert s.details["before"]["unsynchronised"] == ["rabbit3"] and s.details["effective"]
    assert s.details["evidence"]["after"]["syncing"] and s.targets == []
    assert x.details["effective"] and x.details["evidence"]["after"]["unsynchronised"] == ["rabbit3"]


def test_a_sync_with_nothing_to_synchronise_is_ineffective(tmp_path):
    c = SyncingRabbit(tmp_path, steps=0)
    c.state_seq = "done"  # every mirror synchronised before the command: it tests nothing
    with Nemesis(c, tmp_path, clock=RunClock(), settle=0, handle_signals=False, subject="q") as nem:
        s = nem.apply("sync_queue")
    assert not s.details["effective"]


class PlacingRabbit(VersionedRabbit):
    """A fake whose queue shows a move in force ``lag`` looks after the command; its master
    stays where it was (the broker moves it in its own time)."""
    def __init__(self, tmp_path, lag=2):
        super().__init__(tmp_path)
        self.placed, self.wanted, self.lag, self.looks = False, False, lag, 0

    def place_subject(self, subject, nodes):
        self.calls.append(("place", subject, nodes))
        self.wanted, self.looks = nodes is not None, 0

    def placement(self, subject):
        self.looks += 1
        if self.looks > self.lag:
            self.placed = self.wanted
        return {"placed": self.placed, "master": "rabbit1", "replicas": ["rabbit1", "rabbit2"]}


def test_a_move_of_the_replicas_is_proved_by_the_brokers_record(tmp_path):
    """move_replicas (seed 000's trick, seed 001's nodes policy): effective once the broker
    shows the move in force (where the master goes is the row's to judge); restore_replicas
    lifts it; lifting nothing is no effect."""
    c = PlacingRabbit(tmp_path)
    with Nemesis(c, tmp_path, clock=RunClock(), settle=0, handle_signals=False, subject="q") as nem:
        idle = nem.apply("restore_replicas")
        m = nem.apply("move_replicas", "rabbit3")
        r = nem.apply("restore_replicas")
    assert not idle.details["effective"]  # nothing was moved: lifting it tests nothing
    assert ("place", "q", ["rabbit3"]) in c.calls and ("place", "q", None) in c.calls
    assert m.targets == ["rabbit3"] and m.details["before"]["placed"] is False and m.details["effective"]
    assert m.details["evidence"]["after"]["placed"] is True
    assert r.targets == [] and r.details["effective"] and r.details["evidence"]["after"]["placed"] is False


def test_a_blue_green_upgrades_green_starts_on_its_own_version(tmp_path, monkeypatch):
    """link.downstream_version: green's nodes are pinned to another version's image before the
    first compose call, and the cluster's start fails (a harness error, never a verdict) when a
    pinned node does not report that version."""
    import harness.brokers.compose as compose
    from harness.brokers.protocol import ClusterError
    from harness.scenario import parse

    sc = parse({"name": "g", "broker": "rabbitmq", "version": "4.0",
                "queue": {"name": "q", "type": "quorum"},
                "link": {"kind": "federated-queue", "replace": True, "downstream_version": "4.3"}}, env={})
    assert sc.cluster.node_versions == {"rabbit3": "4.3"}
    with pytest.raises(Exception, match="downstream_version: '4.2' is no version here"):
        parse({"name": "g", "broker": "rabbitmq", "queue": {"name": "q", "type": "quorum"},
               "link": {"kind": "federated-queue", "downstream_version": "4.2"}}, env={})
    monkeypatch.setattr(compose, "STATE_DIR", tmp_path)
    c = brokers.get("rabbitmq").cluster(version="4.0")
    calls = []
    monkeypatch.setattr(c, "down", lambda: calls.append("down"))
    monkeypatch.setattr(c, "_compose_up", lambda nodes: calls.append(("up", json.loads(c.image_override().read_text()))))
    monkeypatch.setattr(c, "wait_healthy", lambda *a, **k: None)
    reports = {"rabbit3": "4.3.6"}
    monkeypatch.setattr(ability(c, Versions), "node_version", lambda node: reports[node])
    c.up(sc.cluster)
    assert calls[0] == "down" and calls[1][0] == "up"
    assert calls[1][1]["services"]["rabbit3"]["image"].startswith("mqchaos/rabbitmq:4.3")
    reports["rabbit3"] = "4.0.5"  # the image was not what it was to be
    with pytest.raises(ClusterError, match="rabbit3 was to run 4.3, it reports 4.0.5"):
        c.up(sc.cluster)
