"""RabbitMQ's operator operations as components of its cluster (issue 53,
harness/brokers/rabbitmq/operations.py), without Docker: the capabilities the cluster class
derives from them, and what each component asks of the nodes."""
from types import SimpleNamespace

import pytest

from harness import brokers
from harness.brokers.capabilities import (FAMILIES, DataFiles, Features, Membership, Placement, PowerLoss, RestartApp,
                                          Sync, Versions, ability)
from harness.brokers.protocol import ClusterError
from harness.brokers.rabbitmq import operations
from harness.brokers.rabbitmq.cluster import RabbitCluster

RABBIT_CAPABILITIES = {"kill", "stop", "start", "pause", "wipe", "power_loss", "restart_app", "corrupt",
                       "membership", "upgrade", "features", "sync", "placement"}


def test_the_capabilities_are_those_its_components_give():
    assert RabbitCluster.capabilities == RABBIT_CAPABILITIES
    for name in RabbitCluster.capabilities & set(FAMILIES):
        assert any(issubclass(c, FAMILIES[name]) for c in RabbitCluster.components), name
    plugin = brokers.get("rabbitmq")
    assert plugin.cluster_class("4.3") is RabbitCluster and plugin.capabilities == RABBIT_CAPABILITIES
    assert plugin.capabilities_of("4.3") == RABBIT_CAPABILITIES - {"power_loss"}  # no FUSE in forky
    assert plugin.capabilities_of("4.0") == RABBIT_CAPABILITIES


def test_each_ability_is_one_component_built_once_from_its_cluster():
    c = RabbitCluster("p")
    for proto, comp in ((RestartApp, operations.RabbitRestartApp), (DataFiles, operations.RabbitFiles),
                        (Membership, operations.RabbitMembership), (Versions, operations.RabbitVersions),
                        (Features, operations.RabbitFeatures), (Sync, operations.RabbitSync),
                        (Placement, operations.RabbitPlacement)):
        found = ability(c, proto)
        assert type(found) is comp and found.cluster is c and ability(c, proto) is found
    assert ability(c, PowerLoss).cluster is c
    # none of the moved methods is left on the cluster
    for name in ("members", "change_member", "node_version", "features", "finalize_features", "sync_subject",
                 "sync_state", "place_subject", "placement", "data_files", "data_file_kinds", "restart_app"):
        assert not hasattr(c, name), name


def cluster(queue: dict | None = None, running=("rabbit1", "rabbit2", "rabbit3")):
    """A RabbitCluster whose nodes answer from memory: ``running`` nodes run; each exec and
    rabbitmqctl call is recorded."""
    c = RabbitCluster("p")
    c.did = []
    c.running = lambda n: n in running
    c.queue = lambda name: queue

    def exec_(node, cmd, check=True, timeout=60):
        c.did.append((node, *cmd))
        return 0, ""
    c.exec = exec_
    return c


def test_membership_reads_the_members_and_changes_one_through_another_node():
    c = cluster({"type": "quorum", "members": ["rabbit@rabbit2", "rabbit@rabbit1"]}, running=("rabbit1", "rabbit2"))
    m = ability(c, Membership)
    assert m.members("q") == ["rabbit1", "rabbit2"]
    m.change_member("remove", "rabbit1", "q")
    m.change_member("add", "rabbit3", "q")
    assert c.did == [("rabbit2", "rabbitmq-queues", "delete_member", "q", "rabbit@rabbit1"),
                     ("rabbit1", "rabbitmq-queues", "add_member", "q", "rabbit@rabbit3")]


def test_versions_asks_the_running_node_and_the_image_swap_is_composes(monkeypatch):
    c = cluster(running=("rabbit1",))
    monkeypatch.setattr(operations.ctl, "server_version", lambda cl, node: "4.3.6")
    v = ability(c, Versions)
    assert v.node_version("rabbit1") == "4.3.6" and v.node_version("rabbit2") is None
    assert v.upgrade_reason("4.3") is None and "no version '9.9'" in v.upgrade_reason("9.9")


def test_finalize_enables_every_flag_and_expects_the_stable_ones(monkeypatch):
    c = cluster(running=("rabbit2", "rabbit3"))
    flags = [{"name": "quorum_queue", "state": "enabled", "stability": "required"},
             {"name": "rabbitmq_4.0.0", "state": "disabled", "stability": "stable"},
             {"name": "khepri_db", "state": "disabled", "stability": "experimental"}]
    monkeypatch.setattr(operations.ctl, "feature_flags", lambda cl, node: flags)
    asked = []
    c.rabbitmqctl = lambda node, *args, check=True, timeout=60: asked.append((node, *args, timeout)) or (0, "")
    f = ability(c, Features)
    assert f.features() == {"quorum_queue": "enabled", "rabbitmq_4.0.0": "disabled", "khepri_db": "disabled"}
    assert f.finalize_features({"timeout": 30}) == {"quorum_queue": "enabled", "rabbitmq_4.0.0": "enabled"}
    assert asked == [("rabbit2", "enable_feature_flag", "all", 30.0)]
    with pytest.raises(ClusterError, match="no node runs to list the flags"):
        ability(cluster(running=()), Features).features()


def test_sync_is_the_management_apis_queue_action_and_its_state_the_mirrors():
    c = cluster({"node": "rabbit@rabbit1", "state": "syncing", "slave_nodes": ["rabbit@rabbit2", "rabbit@rabbit3"],
                 "synchronised_slave_nodes": ["rabbit@rabbit2"]})
    posted = []
    c.http = lambda node, method, path, **kw: posted.append((node, method, path, kw["json"])) or \
        SimpleNamespace(status_code=204, text="")
    s = ability(c, Sync)
    s.sync_subject("cancel", "a q")
    assert posted == [("rabbit1", "POST", "queues/%2F/a%20q/actions", {"action": "cancel_sync"})]
    assert s.sync_state("a q") == {"syncing": True, "state": "syncing", "unsynchronised": ["rabbit3"]}
    c.http = lambda node, method, path, **kw: SimpleNamespace(status_code=400, text="not mirrored")
    with pytest.raises(ClusterError, match="sync a q through rabbit1: HTTP 400 not mirrored"):
        s.sync_subject("sync", "a q")


def test_placement_is_a_policy_above_the_runs_own_and_lifting_it_deletes_it():
    c = cluster({"node": "rabbit@rabbit2", "policy": "mqchaos-place", "slave_nodes": ["rabbit@rabbit3"]})
    policies, deleted = [], []
    c.set_policy = lambda name, pattern, definition, priority=0, **kw: policies.append((name, pattern, definition,
                                                                                       priority))
    c.http = lambda node, method, path, **kw: deleted.append((method, path)) or SimpleNamespace(status_code=404)
    p = ability(c, Placement)
    p.place_subject("q.1", ["rabbit2", "rabbit3"])
    assert policies == [("mqchaos-place", r"^q\.1$", {"ha-mode": "nodes", "ha-params": ["rabbit@rabbit2", "rabbit@rabbit3"],
                                                      "ha-sync-mode": "automatic"}, 10)]
    p.place_subject("q.1", None)
    assert deleted == [("DELETE", "policies/%2F/mqchaos-place")]
    assert p.placement("q.1") == {"placed": True, "master": "rabbit2", "replicas": ["rabbit2", "rabbit3"]}


def test_data_files_name_their_kinds_and_find_the_newest_under_the_mnesia_base(monkeypatch):
    c = cluster()
    found = []
    c.newest_files = lambda node, directory, path, name, per_dir: found.append((node, directory, path, name, per_dir)) or []
    files = ability(c, DataFiles)
    assert set(files.kinds()) == {"wal", "segment", "stream", "khepri", "mnesia"}
    files.data_files("rabbit1", "segment", "q")
    assert found == [("rabbit1", "/var/lib/rabbitmq/mnesia", "/var/lib/rabbitmq/mnesia/*/quorum/*", "*.segment", True)]
    with pytest.raises(ClusterError, match="no 'log' data files .kinds: wal, segment"):
        files.data_files("rabbit1", "log", "q")


def test_restart_app_stops_and_starts_the_application_in_the_node():
    c = cluster()
    c.rabbitmqctl = lambda node, *args, check=True, timeout=60: c.did.append((node, *args)) or (0, "")
    ability(c, RestartApp).restart_app("rabbit3")
    assert c.did == [("rabbit3", "stop_app"), ("rabbit3", "start_app")]
