"""Make sure a Docker engine answers (and a compose implementation exists).

On a fresh Debian machine (or CI) running as root: install Debian's ``docker.io`` and
``docker-compose`` if missing, start ``dockerd`` in the background with its log in
``/var/log/mqchaos-dockerd.log``, and wait until ``docker info`` answers. Idempotent.
"""
from __future__ import annotations

import logging
import os
import shutil
import subprocess
import sys

from harness.util import entry_point, run, setup_logging, wait_until

DOCKERD_LOG = os.environ.get("MQCHAOS_DOCKERD_LOG", "/var/log/mqchaos-dockerd.log")
APT_PACKAGES = ["docker.io", "docker-compose", "debootstrap", "iptables", "iproute2"]


log = logging.getLogger(__name__)


def engine_answers() -> bool:
    if not shutil.which("docker"):
        return False
    try:
        return subprocess.run(["docker", "info", "--format", "{{.ServerVersion}}"],
                              capture_output=True, timeout=15).returncode == 0
    except (subprocess.TimeoutExpired, OSError):
        return False


def apt_install(packages: list[str]) -> None:
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    log.info("apt-get install %s", " ".join(packages))
    run(["apt-get", "update", "-qq"], timeout=600, env=env)
    run(["apt-get", "install", "-y", "-qq", "--no-install-recommends", *packages], timeout=1200, env=env)


def missing_packages() -> list[str]:
    need = []
    if not shutil.which("dockerd"):
        need.append("docker.io")
    if not shutil.which("docker-compose") and not _compose_v2():
        need.append("docker-compose")
    if not shutil.which("debootstrap"):
        need.append("debootstrap")
    if not shutil.which("iptables"):
        need.append("iptables")
    return need


def _compose_v2() -> bool:
    if not shutil.which("docker"):
        return False
    try:
        return subprocess.run(["docker", "compose", "version"], capture_output=True,
                              timeout=15).returncode == 0
    except (subprocess.TimeoutExpired, OSError):
        return False


def compose_cmd() -> list[str]:
    """The compose implementation present: ``docker compose`` (v2) or ``docker-compose`` (v1)."""
    if _compose_v2():
        return ["docker", "compose"]
    if shutil.which("docker-compose"):
        return ["docker-compose"]
    raise RuntimeError("no compose implementation: run `mqchaos cluster engine` (installs docker-compose)")


def start_dockerd() -> None:
    os.makedirs(os.path.dirname(DOCKERD_LOG), exist_ok=True)
    log.info("starting dockerd in the background (log: %s)", DOCKERD_LOG)
    logf = open(DOCKERD_LOG, "ab")
    subprocess.Popen(["dockerd"], stdout=logf, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                     start_new_session=True, close_fds=True)
    logf.close()


def ensure_engine(timeout: float = 90) -> None:
    """Install what is missing, start dockerd if nothing answers, wait until it does."""
    need = missing_packages()
    if need:
        if os.geteuid() != 0:
            raise RuntimeError(f"missing {need} and not root: install them first")
        apt_install(need)
    if engine_answers():
        log.info("docker engine answers")
        return
    if os.geteuid() != 0:
        raise RuntimeError("no Docker engine answers and not root: start dockerd yourself")
    start_dockerd()
    try:
        wait_until(engine_answers, timeout, "dockerd to answer `docker info`", interval=1.0)
    except TimeoutError as exc:
        tail = ""
        try:
            with open(DOCKERD_LOG, "rb") as f:
                tail = f.read()[-3000:].decode(errors="replace")
        except OSError:
            pass
        raise TimeoutError(f"{exc}\n--- tail of {DOCKERD_LOG} ---\n{tail}") from None
    log.info("docker engine answers")


def main() -> int:
    ensure_engine()
    print(" ".join(compose_cmd()))
    return 0


if __name__ == "__main__":
    with entry_point():
        setup_logging()
        sys.exit(main())
