"""Build the project's images from its own files, with no container registry.

1. A base image per Debian suite a broker version needs (``Generation.suite``):
   ``debian:<suite>-slim``, pulled if a registry answers, else made with
   ``debootstrap --variant=minbase <suite>`` and ``docker import``.
2. Each broker plug-in's image per version (its ``ImageSpec``: compose/<context>/Dockerfile
   with the generation's build arguments, and what its ``prepare`` puts in the build context,
   e.g. the Kafka jars from Maven Central).

Independent steps run side by side (a bare machine's set-up is mostly waiting on downloads):
the missing base suites are bootstrapped at once, then the images built a few at a time, each
as soon as its base is there. What touches the host (apt, a spec's ``prepare`` with its Maven
repository) runs one at a time.

Each image is tagged by ``ImageSpec.ref``: the default version as today (``<repo>:<hash>``
and ``<repo>:latest``), the others ``<repo>:<version>-<hash>`` and ``<repo>:<version>``. The
hash covers its build inputs (the spec's input files, the build arguments and the base image
id); a build is skipped when the image for the current hash exists. Idempotent.
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from harness import brokers
from harness.brokers import balancer
from harness.brokers.generations import VERSION_LABEL, Generation, ImageSpec
from harness.engine import apt_install, ensure_engine
from harness.util import entry_point, run, setup_logging

ROOT = Path(__file__).resolve().parent.parent
COMPOSE_DIR = ROOT / "compose"
BUILD_DIR = ROOT / "build" / "images"
DEFAULT_SUITE = "bookworm"
# MQCHAOS_BASE_IMAGE names the default suite's base image (as before generations)
BASE_TAG = os.environ.get("MQCHAOS_BASE_IMAGE", f"debian:{DEFAULT_SUITE}-slim")
MIRROR = os.environ.get("MQCHAOS_DEBIAN_MIRROR", "http://deb.debian.org/debian")
SECURITY_MIRROR = os.environ.get("MQCHAOS_DEBIAN_SECURITY_MIRROR", "http://deb.debian.org/debian-security")
# forky is Debian's testing suite: bookworm's debootstrap (1.0.128) has no script named
# after it; testing is bootstrapped like sid
DEBOOTSTRAP_SCRIPT = {"forky": "sid"}
DEBOOTSTRAP_SCRIPTS = Path("/usr/share/debootstrap/scripts")


# docker builds at once: the legacy builder runs them independently; each is mostly apt or
# Maven downloading, so more than the two cores pays, up to the host's disk
PARALLEL_BUILDS = int(os.environ.get("MQCHAOS_PARALLEL_BUILDS", "3"))
_HOST = threading.Lock()  # apt on the host, a spec's prepare (one Maven repository)

log = logging.getLogger(__name__)


def image_id(ref: str) -> str | None:
    proc = subprocess.run(["docker", "image", "inspect", "--format", "{{.Id}}", ref],
                          capture_output=True, text=True, timeout=30)
    return proc.stdout.strip() if proc.returncode == 0 else None


def base_tag(suite: str) -> str:
    return BASE_TAG if suite == DEFAULT_SUITE else f"debian:{suite}-slim"


def sources_list(suite: str) -> str:
    """The base image's apt sources: the suite, its updates and security archives (testing
    has neither in a form worth following: forky gets its main archive only)."""
    lines = [f"deb {MIRROR} {suite} main"]
    if suite != "forky":
        lines += [f"deb {MIRROR} {suite}-updates main", f"deb {SECURITY_MIRROR} {suite}-security main"]
    return "\n".join(lines) + "\n"


def debootstrap_command(suite: str, rootfs: Path) -> list[str]:
    cmd = ["debootstrap", "--variant=minbase", suite, str(rootfs), MIRROR]
    script = DEBOOTSTRAP_SCRIPT.get(suite)
    if script and not (DEBOOTSTRAP_SCRIPTS / suite).exists():
        cmd.append(str(DEBOOTSTRAP_SCRIPTS / script))
    return cmd


def ensure_base(suite: str = DEFAULT_SUITE) -> str:
    """Return the id of the suite's base image, creating it if needed."""
    tag = base_tag(suite)
    iid = image_id(tag)
    if iid:
        return iid
    if os.environ.get("MQCHAOS_TRY_PULL", "1") == "1":
        try:
            proc = subprocess.run(["docker", "pull", tag], capture_output=True, text=True, timeout=60)
            if proc.returncode == 0 and image_id(tag):
                log.info("pulled %s", tag)
                return image_id(tag)  # type: ignore[return-value]
        except subprocess.TimeoutExpired:
            pass
        log.warning("cannot pull %s: building it with debootstrap", tag)
    with _HOST:
        if not shutil.which("debootstrap"):
            apt_install(["debootstrap"])
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="mqchaos-rootfs-") as tmp:
        rootfs = Path(tmp) / "rootfs"
        run(debootstrap_command(suite, rootfs), timeout=1200)
        (rootfs / "etc/apt/sources.list").write_text(sources_list(suite))
        shutil.rmtree(rootfs / "var/cache/apt/archives", ignore_errors=True)
        (rootfs / "var/cache/apt/archives/partial").mkdir(parents=True, exist_ok=True)
        tar = subprocess.Popen(["tar", "-C", str(rootfs), "--numeric-owner", "-c", "."],
                               stdout=subprocess.PIPE)
        imp = subprocess.run(["docker", "import", "--change", 'CMD ["/bin/bash"]', "-", tag],
                             stdin=tar.stdout, capture_output=True, text=True, timeout=600)
        tar.stdout.close()  # type: ignore[union-attr]
        tar.wait(timeout=60)
        if imp.returncode != 0 or tar.returncode != 0:
            raise RuntimeError(f"docker import failed: {imp.stderr}")
    log.info("made %s with debootstrap in %.0fs", tag, time.monotonic() - t0)
    return image_id(tag)  # type: ignore[return-value]


def inputs_hash(spec: ImageSpec, base_id: str, generation: Generation | None = None) -> str:
    h = hashlib.sha256()
    h.update(base_id.encode())
    src = COMPOSE_DIR / spec.context
    for path in sorted(p for p in src.rglob("*") if p.is_file()):
        if path.name not in spec.inputs:  # only what goes into the image
            continue
        h.update(str(path.relative_to(src)).encode())
        h.update(path.read_bytes())
    if generation is not None and generation.build_args:
        h.update(json.dumps(sorted(generation.build_args)).encode())
    return h.hexdigest()[:16]


def context_dir(spec: ImageSpec, generation: Generation) -> Path:
    """The build context of a generation's image (each its own: the jars differ)."""
    return BUILD_DIR / spec.context / (generation.stem() or "default")


def _prepare_context(spec: ImageSpec, generation: Generation) -> Path:
    ctx = context_dir(spec, generation)
    ctx.mkdir(parents=True, exist_ok=True)
    shutil.copy2(COMPOSE_DIR / spec.context / "Dockerfile", ctx / "Dockerfile")
    if spec.prepare:
        spec.prepare(ctx, generation)
    return ctx


def build_command(ref: str, digest: str, generation: Generation, ctx: Path) -> list[str]:
    """``docker build`` of a generation's image: its build arguments, and labels saying what
    it was built from (``mqchaos status`` shows the version each node runs)."""
    build_args = (("BASE_IMAGE", base_tag(generation.suite)), *generation.build_args)
    args = [a for k, v in build_args for a in ("--build-arg", f"{k}={v}")]
    return ["docker", "build", "-q", "--label", f"mqchaos.inputs={digest}", "--label",
            f"{VERSION_LABEL}={generation.name}", *args, "-t", ref, str(ctx)]


def images_to_build(kind: str, versions: list[str] | None = None) -> list[Generation]:
    """The generations whose images ``versions`` need (a generation that runs another's
    image, Kafka 3.9 in KRaft mode, needs that one): one per image."""
    plugin = brokers.get(kind)
    wanted = [plugin.generation(v) for v in (versions or [plugin.version()[0]])]
    out: dict[str, Generation] = {}
    for g in wanted:
        owner = next((o for o in plugin.generations.values() if o.stem() == g.stem() and o.tag is None), g)
        out.setdefault(owner.stem(), owner)
    return list(out.values())


def ensure_image(kind: str, generation: Generation, base_id: str, force: bool = False) -> str:
    ref, built = ensure_spec(brokers.get(kind).image, generation, base_id, force, what=f"{kind} {generation.name}")
    if built:
        dump_config_keys(kind, ref, generation)
    return ref


def ensure_spec(spec: ImageSpec, generation: Generation, base_id: str, force: bool = False,
                what: str = "") -> tuple[str, bool]:
    """``spec``'s image for ``generation``, built if its inputs changed: (its ref, built now)."""
    digest = inputs_hash(spec, base_id, generation)
    ref = spec.ref(generation, digest)
    built = force or not image_id(ref)
    if not built:
        log.info("%s is up to date", ref)
    else:
        with _HOST:
            missing = [package for command, package in spec.tools if not shutil.which(command)]
            if missing:
                apt_install(missing)
            ctx = _prepare_context(spec, generation)
        t0 = time.monotonic()
        log.info("building %s (%s on %s)", ref, what or spec.repo, generation.suite)
        env = dict(os.environ, DOCKER_BUILDKIT="0")
        run(build_command(ref, digest, generation, ctx), timeout=1800, env=env)
        log.info("built %s in %.0fs", ref, time.monotonic() - t0)
    run(["docker", "tag", ref, spec.ref(generation)], timeout=60)
    return ref, built


def ensure_balancer(force: bool = False, base_id: str | None = None) -> str:
    """The load balancer's image (harness.brokers.balancer: HAProxy from the default suite)."""
    g = balancer.GENERATION
    return ensure_spec(balancer.IMAGE, g, base_id or ensure_base(g.suite), force, what="load balancer")[0]


def dump_config_keys(kind: str, ref: str, generation: Generation | None = None) -> Path:
    """The broker's own configuration names, dumped from the image just built (the plug-in's
    committed config-keys.json must be the default version's: tests/test_images_real.py)."""
    spec = brokers.get(kind).image
    out = (context_dir(spec, generation) if generation else BUILD_DIR / spec.context) / "config-keys.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(brokers.get(kind).dump_config_keys(ref), indent=1) + "\n")
    log.info("%s: configuration names dumped to %s", kind, out)
    return out


def ensure_images(kinds: list[str] | None = None, force: bool = False,
                  versions: dict[str, list[str]] | None = None) -> dict[str, dict[str, str]]:
    """The images of ``kinds`` (default: every broker) for ``versions`` (by broker; default:
    the version the usual rule picks), each base suite made once: {kind: {version: ref}}."""
    ensure_engine()
    jobs = [(kind, g) for kind in kinds or list(brokers.KINDS)
            for g in images_to_build(kind, (versions or {}).get(kind))]
    with_balancer = any("balancer" in brokers.get(k).settings_model.model_fields for k in kinds or brokers.KINDS)
    suites = list(dict.fromkeys([g.suite for _, g in jobs] + ([balancer.GENERATION.suite] if with_balancer else [])))
    out: dict[str, dict[str, str]] = {}
    with ThreadPoolExecutor(max_workers=max(1, len(suites)), thread_name_prefix="base") as pool:
        bases = {suite: pool.submit(ensure_base, suite) for suite in suites}
        with ThreadPoolExecutor(max_workers=max(1, PARALLEL_BUILDS), thread_name_prefix="build") as builds:
            # each build waits for its own base only; results in the jobs' order
            built = [(kind, g, builds.submit(lambda k=kind, g=g: ensure_image(k, g, bases[g.suite].result(),
                                                                              force=force)))
                     for kind, g in jobs]
            lb = (builds.submit(lambda: ensure_balancer(force, bases[balancer.GENERATION.suite].result()))
                  if with_balancer else None)
            for kind, g, f in built:
                out.setdefault(kind, {})[g.name] = f.result()
            if lb is not None:
                out["balancer"] = {"haproxy": lb.result()}
    return out


def main() -> int:
    for kind, refs in ensure_images().items():
        for version, ref in refs.items():
            print(f"{kind} {version}: {ref}")
    return 0


if __name__ == "__main__":
    with entry_point():
        setup_logging()
        sys.exit(main())
