"""The storage primitives a ``corrupt`` fault uses (harness/brokers/containers.py:
newest_files, file_bytes, patch_file) on a real container, running and stopped: what is
written reads back, in place while the container runs, through a copy while it is down."""
import subprocess

import pytest

from harness.brokers.containers import ContainerCluster

pytestmark = pytest.mark.docker

IMAGE = "mqchaos/kafka:latest"  # any of the project's images: a shell and coreutils


def _docker_ok() -> bool:
    try:
        return subprocess.run(["docker", "image", "inspect", IMAGE], capture_output=True, timeout=20).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


class One(ContainerCluster):
    """Just node access over one container (no compose project)."""
    kind, network_key, data_mounts = "one", "none", {}

    def nodes(self):
        return ["mqchaos-corrupt-test"]

    brokers = nodes

    def up(self, settings=None): ...
    def down(self): ...
    def wait_healthy(self, timeout): ...
    def healthy(self): return True
    def client_endpoints(self): return {}
    def versions(self): return {}
    def stuck_nodes(self): return []
    def wait_rejoined(self, node, timeout): ...
    def wait_whole(self, timeout, steady, record, stale_after=None): ...


@pytest.fixture
def node():
    if not _docker_ok():
        pytest.skip(f"no Docker engine or no {IMAGE} image")
    name = "mqchaos-corrupt-test"
    subprocess.run(["docker", "rm", "-f", name], capture_output=True)
    subprocess.run(["docker", "run", "-d", "--name", name, "--network", "none", "--entrypoint", "sleep", IMAGE,
                    "600"], check=True, capture_output=True)
    script = ("mkdir -p /d/t-0 /d/t-1 && printf 'ABCDEFGHIJ' > /d/t-0/00000000000000000000.log && "
              "printf 'abcdefghijklmnop' > /d/t-0/00000000000000000042.log && printf 'xyz' > /d/t-1/00000000000000000000.log")
    subprocess.run(["docker", "exec", name, "sh", "-c", script], check=True)
    yield name
    subprocess.run(["docker", "rm", "-f", name], capture_output=True)


def test_files_change_in_place_while_running_and_through_a_copy_when_stopped(node):
    c = One("none")
    assert c.newest_files(node, "/d", "*/t-*/*", "*.log") == [("/d/t-0/00000000000000000042.log", 16),
                                                             ("/d/t-1/00000000000000000000.log", 3)]
    path = "/d/t-0/00000000000000000042.log"
    assert c.file_bytes(node, path, [0, 15, 99]) == {0: ord("a"), 15: ord("p")}
    c.patch_file(node, path, {1: ord("b") ^ 4, 15: 0})
    assert c.file_bytes(node, path, [1, 15]) == {1: ord("b") ^ 4, 15: 0}
    c.patch_file(node, path, size=8)
    assert c.file_bytes(node, path, [7, 8]) == {7: ord("h")}
    subprocess.run(["docker", "stop", "-t", "1", node], check=True, capture_output=True)
    assert not c.running(node)
    c.patch_file(node, "/d/t-1/00000000000000000000.log", {0: ord("X")}, size=2)
    assert c.file_bytes(node, "/d/t-1/00000000000000000000.log", [0, 1, 2]) == {0: ord("X"), 1: ord("y")}
