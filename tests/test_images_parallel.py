"""harness.images.ensure_images on a bare machine: each missing base suite is made once, the
suites side by side; each image's build waits for its own base only, several at once; the
result names every image in the order asked, whatever order the builds end in. The docker
steps are stand-ins that record when they ran."""
from __future__ import annotations

import threading
import time

import pytest

from harness import brokers, images
from harness.brokers import balancer


@pytest.fixture
def recorder(monkeypatch):
    events, lock = [], threading.Lock()

    def note(*what):
        with lock:
            events.append((time.monotonic(), *what))

    def base(suite):
        note("base-start", suite)
        time.sleep({"bookworm": 0.3, "trixie": 0.1, "forky": 0.2}.get(suite, 0.1))
        note("base-end", suite)
        return f"id-{suite}"

    def image(kind, g, base_id, force=False):
        assert base_id == f"id-{g.suite}"
        note("build-start", kind, g.name)
        time.sleep(0.2)
        note("build-end", kind, g.name)
        return f"{kind}:{g.name}"

    def lb(force=False, base_id=None):
        assert base_id == f"id-{balancer.GENERATION.suite}"
        note("build-start", "balancer", "haproxy")
        return "haproxy"
    monkeypatch.setattr(images, "ensure_engine", lambda: None)
    monkeypatch.setattr(images, "ensure_base", base)
    monkeypatch.setattr(images, "ensure_image", image)
    monkeypatch.setattr(images, "ensure_balancer", lb)
    return events


def test_bases_once_side_by_side_and_each_build_after_its_own_base(recorder):
    wanted = {k: list(brokers.get(k).generations) for k in brokers.KINDS}
    out = images.ensure_images(versions=wanted)
    starts = [e for e in recorder if e[1] == "base-start"]
    suites = [e[2] for e in starts]
    assert len(suites) == len(set(suites))  # each suite made once
    ended = {e[2]: e[0] for e in recorder if e[1] == "base-end"}
    # every base started before any ended: side by side
    assert max(e[0] for e in starts) < min(ended.values())
    for e in recorder:
        if e[1] == "build-start" and e[2] != "balancer":
            g = brokers.get(e[2]).generation(e[3])
            assert e[0] >= ended[g.suite]
    # several builds at once: some build started before another ended
    spans = {(e[2], e[3]): [e[0]] for e in recorder if e[1] == "build-start" and e[2] != "balancer"}
    for e in recorder:
        if e[1] == "build-end":
            spans[(e[2], e[3])].append(e[0])
    assert any(a[0] < b[1] and b[0] < a[1] for x, a in spans.items() for y, b in spans.items() if x < y)
    # the result: every image, by broker in the order asked
    for k in brokers.KINDS:
        assert list(out[k]) == [g.name for g in images.images_to_build(k, wanted[k])]
    assert out["balancer"] == {"haproxy": "haproxy"}


def test_a_failed_build_is_raised(recorder, monkeypatch):
    def broken(kind, g, base_id, force=False):
        raise RuntimeError(f"docker build failed: {kind} {g.name}")
    monkeypatch.setattr(images, "ensure_image", broken)
    with pytest.raises(RuntimeError, match="docker build failed"):
        images.ensure_images()
