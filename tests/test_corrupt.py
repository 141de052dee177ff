"""The ``corrupt`` fault (nemesis/faults.py) against a fake cluster's files: planned from the
seed before it acts, its evidence the bytes before and after, a change that does not read
back an ineffective fault."""
import json

import pytest

from fakes import FakeRabbit
from harness.history import RunClock
from nemesis.core import LOG_FILE, Nemesis


class FilesRabbit(FakeRabbit):
    """FakeRabbit whose nodes hold files (bytes) and can corrupt them."""

    def kinds(self):
        return {"wal": "a write-ahead log"}

    def __init__(self, tmp_path, broken=False):
        super().__init__(tmp_path)
        self.files = {n: {"/m/q/1.wal": bytearray(b"0123456789" * 10)} for n in self.nodes()}
        self.broken = broken  # writes that do not stick

    def data_files(self, node, kind, subject):
        return [(p, len(b)) for p, b in self.files[node].items()]

    def file_bytes(self, node, path, positions):
        data = self.files[node][path]
        return {p: data[p] for p in positions if p < len(data)}

    def patch_file(self, node, path, changes=None, size=None):
        self.calls.append(("patch", node, path, self.running(node)))
        if self.broken:
            return
        data = self.files[node][path]
        for p, b in (changes or {}).items():
            data[p] = b
        if size is not None:
            del data[size:]


def _records(tmp_path):
    return [json.loads(x) for x in (tmp_path / LOG_FILE).read_text().splitlines()]


def test_a_bitflip_changes_one_bit_per_chosen_byte_and_records_them(tmp_path):
    c = FilesRabbit(tmp_path)
    original = bytes(c.files["rabbit2"]["/m/q/1.wal"])
    with Nemesis(c, tmp_path, clock=RunClock(), settle=0, handle_signals=False, seed=4) as nem:
        f = nem.apply("corrupt", "rabbit2", files="wal", bytes=3, tail=20)
    after = c.files["rabbit2"]["/m/q/1.wal"]
    diff = [i for i in range(len(original)) if original[i] != after[i]]
    assert len(diff) == 3 and all(i >= 80 for i in diff)
    assert all(bin(original[i] ^ after[i]).count("1") == 1 for i in diff)
    entry = f.details["files"]["rabbit2"][0]
    assert entry["positions"] == diff and set(entry["bytes"]) == {str(i) for i in diff}
    assert f.details["effective"] is True and c.files["rabbit1"]["/m/q/1.wal"] == bytearray(original)
    rec = _records(tmp_path)[0]
    assert rec["fault"] == "corrupt" and rec["details"]["files"]["rabbit2"][0]["path"] == "/m/q/1.wal"


def test_crash_then_corrupt_kills_first_then_a_start_lifts_it(tmp_path):
    c = FilesRabbit(tmp_path)
    with Nemesis(c, tmp_path, clock=RunClock(), settle=0, handle_signals=False, seed=1) as nem:
        f = nem.apply("corrupt", "rabbit3", files="wal", mode="truncate", bytes=40, crash=True)
        assert c.state["rabbit3"] == "exited" and f in nem.active_faults()
        assert ("patch", "rabbit3", "/m/q/1.wal", False) in c.calls  # changed while down
        nem.apply("start", "rabbit3")
        assert f not in nem.active_faults()
    assert len(c.files["rabbit3"]["/m/q/1.wal"]) == 60 and f.details["effective"] is True
    assert f.details["evidence"]["down"] == {"rabbit3": True}


def test_a_change_that_does_not_read_back_is_no_effect(tmp_path):
    c = FilesRabbit(tmp_path, broken=True)
    with Nemesis(c, tmp_path, clock=RunClock(), settle=0, handle_signals=False) as nem:
        f = nem.apply("corrupt", "rabbit1", files="wal")
    assert f.details["effective"] is False


@pytest.mark.parametrize("params, error", [({"files": "nope"}, "params.files"),
                                           ({"files": "wal", "mode": "shred"}, "params.mode")])
def test_a_bad_corrupt_step_names_its_field(tmp_path, params, error):
    c = FilesRabbit(tmp_path)
    with Nemesis(c, tmp_path, clock=RunClock(), settle=0, handle_signals=False) as nem:
        with pytest.raises(Exception, match=error):
            nem.apply("corrupt", "rabbit1", **params)


class MembersRabbit(FakeRabbit):
    """FakeRabbit whose queue has members the operator can change (or not, ``stuck``)."""

    def __init__(self, tmp_path, stuck=False):
        super().__init__(tmp_path)
        self.held, self.stuck = ["rabbit1", "rabbit2", "rabbit3"], stuck

    def members(self, subject):
        return list(self.held)

    def change_member(self, op, node, subject):
        self.calls.append((op, node, subject))
        if not self.stuck:
            self.held = sorted(set(self.held) - {node}) if op == "remove" else sorted(set(self.held) | {node})


def test_membership_changes_are_proved_by_the_member_set(tmp_path):
    c = MembersRabbit(tmp_path)
    with Nemesis(c, tmp_path, clock=RunClock(), settle=0, handle_signals=False, subject="q") as nem:
        r = nem.apply("remove_member", "rabbit3")
        a = nem.apply("add_member", "rabbit3")
    assert r.details["members_before"] == ["rabbit1", "rabbit2", "rabbit3"]
    assert r.details["evidence"]["members_after"] == ["rabbit1", "rabbit2"] and r.details["effective"] is True
    assert a.details["evidence"]["members_after"] == ["rabbit1", "rabbit2", "rabbit3"] and a.details["effective"]
    assert ("remove", "rabbit3", "q") in c.calls and not nem.active_faults()
    stuck = MembersRabbit(tmp_path, stuck=True)
    with Nemesis(stuck, tmp_path / "s", clock=RunClock(), settle=0, handle_signals=False, subject="q") as nem:
        f = nem.apply("remove_member", "rabbit2", timeout=0.2)
    assert f.details["effective"] is False  # the tool answered, the member stayed: no effect


class TimingOutRabbit(MembersRabbit):
    """The change's request times out ``timeouts`` times (its leader killed mid-change); with
    ``applied`` the broker made the change all the same."""

    def __init__(self, tmp_path, timeouts, applied=False):
        super().__init__(tmp_path)
        self.timeouts, self.applied = timeouts, applied

    def change_member(self, op, node, subject):
        if self.timeouts:
            self.timeouts -= 1
            if self.applied:
                super().change_member(op, node, subject)
            raise RuntimeError("TimeoutException: The request timed out.")
        super().change_member(op, node, subject)


def test_a_refused_membership_change_is_asked_again_and_shows_what_the_broker_did(tmp_path, monkeypatch):
    from nemesis import kinds
    monkeypatch.setattr(kinds.time, "sleep", lambda s: None)
    c = TimingOutRabbit(tmp_path, timeouts=1)
    with Nemesis(c, tmp_path, clock=RunClock(), settle=0, handle_signals=False, subject="q") as nem:
        f = nem.apply("remove_member", "rabbit3", retry_s=30)
    assert f.details["effective"] is True and len(f.details["refused"]) == 1
    once = TimingOutRabbit(tmp_path, timeouts=1, applied=True)  # asked once: failed, yet applied
    with Nemesis(once, tmp_path / "o", clock=RunClock(), settle=0, handle_signals=False, subject="q") as nem:
        with pytest.raises(RuntimeError, match="timed out"):
            nem.apply("remove_member", "rabbit3")
    rec = [json.loads(x) for x in (tmp_path / "o" / LOG_FILE).read_text().splitlines()][-1]
    assert rec["details"]["members_after_refusal"] == ["rabbit1", "rabbit2"]


def test_a_pause_waits_for_execs_into_the_node_and_refuses_new_ones():
    import threading
    import time

    from harness.brokers.containers import NodeGate
    from harness.brokers.protocol import ClusterError

    gate, order = NodeGate(drain_s=5), []
    inside = threading.Event()

    def long_exec():
        with gate.exec_into("n1"):
            inside.set()
            time.sleep(0.3)
            order.append("exec done")
    t = threading.Thread(target=long_exec)
    t.start()
    inside.wait(2)
    with gate.freezing("n1"):
        order.append("paused")  # only once the exec already running has ended
        with pytest.raises(ClusterError, match="being paused"):
            with gate.exec_into("n1"):
                pass
        with gate.exec_into("n2"):  # other nodes are not held up
            order.append("n2 exec")
    t.join()
    assert order == ["exec done", "paused", "n2 exec"]
    with gate.exec_into("n1"):  # after the pause call, execs go through (docker answers for itself)
        pass


def test_a_pause_the_freezer_gave_up_on_is_tried_again(monkeypatch):
    import subprocess

    from harness.brokers import containers as C
    from harness.brokers.protocol import ClusterError

    calls, state = [], {"paused": False}

    def fake_docker(*args, check=True, timeout=120):
        calls.append(args)
        if len(calls) == 1:  # runc's freeze timed out; it thawed the container back
            return subprocess.CompletedProcess(args, 1, "", "OCI runtime pause failed: unable to freeze: unknown")
        state["paused"] = True
        return subprocess.CompletedProcess(args, 0, "", "")
    monkeypatch.setattr(C, "docker", fake_docker)
    from harness import brokers

    c = brokers.get("kafka").cluster(version="4.1")  # a ContainerCluster; docker is faked
    monkeypatch.setattr(c, "paused", lambda node: state["paused"])
    monkeypatch.setattr(c, "running", lambda node: True)
    c.pause("kafka2")
    assert calls == [("pause", "kafka2"), ("pause", "kafka2")] and state["paused"]
    state["paused"] = False
    monkeypatch.setattr(C, "docker", lambda *a, **k: subprocess.CompletedProcess(a, 1, "", "no such container"))
    with pytest.raises(ClusterError, match="no such container"):  # another failure is not retried
        c.pause("kafka2")


def test_a_heal_of_a_dead_runs_fault_passes_over_a_container_removed_since(tmp_path):
    from nemesis import faults as F

    c = FakeRabbit(tmp_path)
    c.exists = lambda n: n != "rabbit3"  # a later run's cluster replaced it
    f = F.Fault(id="f1", fault="kill", targets=["rabbit2", "rabbit3"], undo={"start": ["rabbit2", "rabbit3"]})
    F.undo(c, f)
    assert ("start", "rabbit2") in c.calls and ("start", "rabbit3") not in c.calls and not f.pending()


def test_a_timed_out_change_the_broker_made_anyway_is_not_asked_again(tmp_path, monkeypatch):
    from nemesis import kinds
    monkeypatch.setattr(kinds.time, "sleep", lambda s: None)
    c = TimingOutRabbit(tmp_path, timeouts=1, applied=True)
    with Nemesis(c, tmp_path, clock=RunClock(), settle=0, handle_signals=False, subject="q") as nem:
        f = nem.apply("remove_member", "rabbit3", retry_s=30)
    assert f.details["effective"] is True and len(f.details["refused"]) == 1
    assert [x for x in c.calls if x[0] == "remove"] == [("remove", "rabbit3", "q")]  # once, not twice
