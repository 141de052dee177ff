"""Build the project's images from its own files, with no container registry.

1. ``debian:bookworm-slim``: pulled if a registry answers, else made with
   ``debootstrap --variant=minbase bookworm`` and ``docker import``.
2. Each broker plug-in's image (its ``ImageSpec``: compose/<context>/Dockerfile, and what
   its ``prepare`` puts in the build context, e.g. the Kafka jars from Maven Central).

Each image is tagged ``<repo>:<hash>`` where the hash covers its build inputs (the
spec's input files and the base image id) and ``<repo>:latest``; a build is skipped
when the image for the current hash exists. Idempotent.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from harness import brokers
from harness.brokers.base import ImageSpec
from harness.engine import apt_install, ensure_engine
from harness.util import run

ROOT = Path(__file__).resolve().parent.parent
COMPOSE_DIR = ROOT / "compose"
BUILD_DIR = ROOT / "build" / "images"
BASE_TAG = os.environ.get("MQCHAOS_BASE_IMAGE", "debian:bookworm-slim")
MIRROR = os.environ.get("MQCHAOS_DEBIAN_MIRROR", "http://deb.debian.org/debian")
SECURITY_MIRROR = os.environ.get("MQCHAOS_DEBIAN_SECURITY_MIRROR", "http://deb.debian.org/debian-security")


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
        apt_install(["debootstrap"])
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


def inputs_hash(spec: ImageSpec, base_id: str) -> str:
    h = hashlib.sha256()
    h.update(base_id.encode())
    src = COMPOSE_DIR / spec.context
    for path in sorted(p for p in src.rglob("*") if p.is_file()):
        if path.name not in spec.inputs:  # only what goes into the image
            continue
        h.update(str(path.relative_to(src)).encode())
        h.update(path.read_bytes())
    return h.hexdigest()[:16]


def _prepare_context(spec: ImageSpec) -> Path:
    ctx = BUILD_DIR / spec.context
    ctx.mkdir(parents=True, exist_ok=True)
    shutil.copy2(COMPOSE_DIR / spec.context / "Dockerfile", ctx / "Dockerfile")
    if spec.prepare:
        spec.prepare(ctx)
    return ctx


def ensure_image(kind: str, base_id: str, force: bool = False) -> str:
    spec = brokers.get(kind).image
    digest = inputs_hash(spec, base_id)
    ref = f"{spec.repo}:{digest}"
    if not force and image_id(ref):
        log(f"{ref} is up to date")
    else:
        missing = [package for command, package in spec.tools if not shutil.which(command)]
        if missing:
            apt_install(missing)
        ctx = _prepare_context(spec)
        t0 = time.monotonic()
        log(f"building {ref}")
        env = dict(os.environ, DOCKER_BUILDKIT="0")
        run(["docker", "build", "-q", "--label", f"mqchaos.inputs={digest}", "-t", ref, str(ctx)],
            timeout=1800, env=env)
        log(f"built {ref} in {time.monotonic() - t0:.0f}s")
        dump_config_keys(kind, ref)
    run(["docker", "tag", ref, f"{spec.repo}:latest"], timeout=60)
    return ref


def dump_config_keys(kind: str, ref: str) -> Path:
    """The broker's own configuration names, dumped from the image just built (the plug-in's
    committed config-keys.json must be the same: tests/test_images_real.py)."""
    out = BUILD_DIR / brokers.get(kind).image.context / "config-keys.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(brokers.get(kind).dump_config_keys(ref), indent=1) + "\n")
    log(f"{kind}: configuration names dumped to {out}")
    return out


def ensure_images(kinds: list[str] | None = None, force: bool = False) -> dict[str, str]:
    ensure_engine()
    base = ensure_base()
    return {k: ensure_image(k, base, force=force) for k in (kinds or list(brokers.KINDS))}


def main() -> int:
    refs = ensure_images()
    for kind, ref in refs.items():
        print(f"{kind}: {ref}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
