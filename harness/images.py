"""Build the project's images from its own files, with no container registry.

1. ``debian:bookworm-slim``: pulled if a registry answers, else made with
   ``debootstrap --variant=minbase bookworm`` and ``docker import``.
2. ``mqchaos/rabbitmq`` (compose/rabbitmq/Dockerfile) and ``mqchaos/kafka``
   (compose/kafka/Dockerfile + the Kafka jars resolved from Maven Central with
   compose/kafka/pom.xml). The kafka image also runs ZooKeeper.

Each image is tagged ``<repo>:<hash>`` where the hash covers its build inputs (the
files of compose/<kind>/ and the base image id) and ``<repo>:latest``; a build is
skipped when the image for the current hash exists. Idempotent.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from harness.util import run

ROOT = Path(__file__).resolve().parent.parent
COMPOSE_DIR = ROOT / "compose"
BUILD_DIR = ROOT / "build" / "images"
BASE_TAG = os.environ.get("MQCHAOS_BASE_IMAGE", "debian:bookworm-slim")
MIRROR = os.environ.get("MQCHAOS_DEBIAN_MIRROR", "http://deb.debian.org/debian")
SECURITY_MIRROR = os.environ.get("MQCHAOS_DEBIAN_SECURITY_MIRROR", "http://deb.debian.org/debian-security")

IMAGES = {
    "rabbitmq": "mqchaos/rabbitmq",
    "kafka": "mqchaos/kafka",
}


def log(msg: str) -> None:
    print(f"[images] {msg}", file=sys.stderr, flush=True)


def image_id(ref: str) -> str | None:
    proc = subprocess.run(["docker", "image", "inspect", "--format", "{{.Id}}", ref],
                          capture_output=True, text=True, timeout=30)
    return proc.stdout.strip() if proc.returncode == 0 else None


def ensure_base() -> str:
    """Return the id of the base image, creating it if needed."""
    iid = image_id(BASE_TAG)
    if iid:
        return iid
    if os.environ.get("MQCHAOS_TRY_PULL", "1") == "1":
        try:
            proc = subprocess.run(["docker", "pull", BASE_TAG], capture_output=True, text=True, timeout=60)
            if proc.returncode == 0 and image_id(BASE_TAG):
                log(f"pulled {BASE_TAG}")
                return image_id(BASE_TAG)  # type: ignore[return-value]
        except subprocess.TimeoutExpired:
            pass
        log(f"cannot pull {BASE_TAG}: building it with debootstrap")
    if not shutil.which("debootstrap"):
        from harness.engine import _apt_install
        _apt_install(["debootstrap"])
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="mqchaos-rootfs-") as tmp:
        rootfs = Path(tmp) / "rootfs"
        run(["debootstrap", "--variant=minbase", "bookworm", str(rootfs), MIRROR], timeout=1200)
        (rootfs / "etc/apt/sources.list").write_text(
            f"deb {MIRROR} bookworm main\n"
            f"deb {MIRROR} bookworm-updates main\n"
            f"deb {SECURITY_MIRROR} bookworm-security main\n")
        shutil.rmtree(rootfs / "var/cache/apt/archives", ignore_errors=True)
        (rootfs / "var/cache/apt/archives/partial").mkdir(parents=True, exist_ok=True)
        tar = subprocess.Popen(["tar", "-C", str(rootfs), "--numeric-owner", "-c", "."],
                               stdout=subprocess.PIPE)
        imp = subprocess.run(["docker", "import", "--change", 'CMD ["/bin/bash"]', "-", BASE_TAG],
                             stdin=tar.stdout, capture_output=True, text=True, timeout=600)
        tar.stdout.close()  # type: ignore[union-attr]
        tar.wait(timeout=60)
        if imp.returncode != 0 or tar.returncode != 0:
            raise RuntimeError(f"docker import failed: {imp.stderr}")
    log(f"made {BASE_TAG} with debootstrap in {time.monotonic() - t0:.0f}s")
    return image_id(BASE_TAG)  # type: ignore[return-value]


def inputs_hash(kind: str, base_id: str) -> str:
    h = hashlib.sha256()
    h.update(base_id.encode())
    src = COMPOSE_DIR / kind
    for path in sorted(p for p in src.rglob("*") if p.is_file()):
        # Only files that go into the image: the Dockerfile and, for kafka, the pom.
        if path.name not in ("Dockerfile", "pom.xml"):
            continue
        h.update(str(path.relative_to(src)).encode())
        h.update(path.read_bytes())
    return h.hexdigest()[:16]


def _prepare_context(kind: str) -> Path:
    ctx = BUILD_DIR / kind
    ctx.mkdir(parents=True, exist_ok=True)
    shutil.copy2(COMPOSE_DIR / kind / "Dockerfile", ctx / "Dockerfile")
    if kind == "kafka":
        libs = ctx / "libs"
        if libs.exists():
            shutil.rmtree(libs)
        libs.mkdir()
        log("resolving the Kafka jars from Maven Central (mvn dependency:copy-dependencies)")
        run(["mvn", "-q", "-B", "-f", str(COMPOSE_DIR / "kafka" / "pom.xml"),
             "dependency:copy-dependencies", "-DincludeScope=runtime",
             f"-DoutputDirectory={libs}"], timeout=1200)
        if not any(libs.glob("kafka_2.13-*.jar")) or not any(libs.glob("zookeeper-*.jar")):
            raise RuntimeError(f"maven did not resolve kafka/zookeeper jars into {libs}")
    return ctx


def ensure_image(kind: str, base_id: str, force: bool = False) -> str:
    repo = IMAGES[kind]
    digest = inputs_hash(kind, base_id)
    ref = f"{repo}:{digest}"
    if not force and image_id(ref):
        log(f"{ref} is up to date")
    else:
        if kind == "kafka" and not shutil.which("mvn"):
            from harness.engine import _apt_install
            _apt_install(["maven"])
        ctx = _prepare_context(kind)
        t0 = time.monotonic()
        log(f"building {ref}")
        env = dict(os.environ, DOCKER_BUILDKIT="0")
        run(["docker", "build", "-q", "--label", f"mqchaos.inputs={digest}", "-t", ref, str(ctx)],
            timeout=1800, env=env)
        log(f"built {ref} in {time.monotonic() - t0:.0f}s")
    run(["docker", "tag", ref, f"{repo}:latest"], timeout=60)
    return ref


def ensure_images(kinds: list[str] | None = None, force: bool = False) -> dict[str, str]:
    from harness.engine import ensure_engine
    ensure_engine()
    base = ensure_base()
    return {k: ensure_image(k, base, force=force) for k in (kinds or list(IMAGES))}


def main() -> int:
    refs = ensure_images()
    for kind, ref in refs.items():
        print(f"{kind}: {ref}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
