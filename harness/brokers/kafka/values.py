"""The values Kafka accepts, checked before a run (issue 34, "values validated").

Each broker and topic config's type and valid values come from Kafka's own ConfigDef: the
documentation its classes print (``java kafka.server.KafkaConfig``, what the key dump runs in
the image; the same HTML as kafka.apache.org's generated/kafka_config.html), read by
``parse_configdef`` into config-values.json. ``value_problem`` judges a value as ConfigDef's
parse and validator would: a broker refuses to start with a bad server.properties value, and
a bad topic config fails the topic's creation.
"""
from __future__ import annotations

import argparse
import html
import json
import re
from functools import cache
from pathlib import Path
from typing import Any

from harness.brokers.containers import docker
from harness.util import entry_point, setup_logging

VALUES_FILE = Path(__file__).with_name("config-values.json")

_ENTRY = re.compile(r'<h4><a id="([^"]+)"></a>.*?<th>Type:</th><td>([^<]*)</td>.*?'
                    r"<th>Valid Values:</th><td>(.*?)</td>", re.S)


def parse_configdef(text: str) -> dict[str, dict]:
    """{name: {"type": "int", "valid": "[1,...]"}} from ConfigDef.toHtml's output; "valid"
    only where ConfigDef states a validator."""
    out = {}
    for name, kind, valid in _ENTRY.findall(text):
        entry = {"type": kind.strip()}
        if valid.strip():
            entry["valid"] = html.unescape(valid.strip())
        out[name] = entry
    return dict(sorted(out.items()))


# ---- judging a value -----------------------------------------------------------------------------

_RANGE = re.compile(r"^\[(-?[\d.]+),\.\.\.(?:,(-?[\d.]+))?\](?: or (-?\d+))?$")
_INTS = {"int": 2**31, "short": 2**15, "long": 2**63}


def _number(kind: str, value: str) -> float | None:
    """ConfigDef.parseType: an int / short / long is a Java integer of that width (no
    decimals), a double any number; None when it does not parse."""
    try:
        n = float(value) if kind == "double" else int(value)
    except ValueError:
        return None
    if kind in _INTS and not -_INTS[kind] <= n < _INTS[kind]:
        return None
    return n


def _valid_problem(valid: str, value: str, n: float | None) -> str | None:
    """ConfigDef's validators as their toString prints them: Range ``[a,...]`` / ``[a,...,b]``
    (and `` or -1``), ValidString / ValidList ``[x, y]``, ``non-empty string``."""
    m = _RANGE.match(valid)
    if m and n is not None:
        low, high, alt = (float(x) if x is not None else None for x in m.groups())
        if n == alt or ((low is None or n >= low) and (high is None or n <= high)):
            return None
        return f"{value} is outside {valid}"
    if valid.startswith("[") and valid.endswith("]") and ",..." not in valid and ":" not in valid:
        choices = [c.strip() for c in valid[1:-1].split(",")]
        given = [v.strip() for v in value.split(",")]  # a list config takes several
        bad = [v for v in given if v not in choices and v.lower() not in [c.lower() for c in choices]]
        return f"{value!r} is not one of {valid}" if bad else None
    if valid == "non-empty string" and not value.strip():
        return "an empty string (it must not be empty)"
    return None


def value_problem(entry: dict, value: str) -> str | None:
    """Why ConfigDef would refuse ``value`` (as rendered: server.properties / the topic
    config's text) for a config of this type and validator; None when it takes it."""
    kind = entry.get("type", "string")
    n = None
    if kind == "boolean":
        if value.strip().lower() not in ("true", "false"):  # ConfigDef: true or false, any case
            return f"{value!r} is not a boolean (true or false)"
    elif kind in (*_INTS, "double"):
        n = _number(kind, value.strip())
        if n is None:
            return f"{value!r} is not {'a number' if kind == 'double' else 'an integer'} ({kind})"
    return _valid_problem(entry["valid"], value, n) if entry.get("valid") else None


@cache
def _values(path: str) -> dict:
    return json.loads(Path(path).read_text())


def configs(version: str, kind: str) -> dict[str, dict] | None:
    """The version's ConfigDef entries of ``kind`` ("broker" / "topic") from the committed
    file; a version that runs another's image (3.9-kraft: 3.9's) names it ("same": ...); None
    when the file has no entry for the version (nothing is judged by it)."""
    versions = _values(str(VALUES_FILE)).get("versions", {})
    entry = versions.get(version)
    if isinstance(entry, dict) and "same" in entry:
        entry = versions.get(entry["same"])
    return entry[kind] if entry else None


# ---- the dump (from a built image) and the committed file ----------------------------------------

CLASSES = {"broker": "kafka.server.KafkaConfig", "topic": "org.apache.kafka.storage.internals.log.LogConfig"}


def dump(image_ref: str) -> dict[str, Any]:
    """The broker and topic ConfigDefs of the Kafka in ``image_ref`` (the classes the key
    dump runs): {"version": ..., "broker": {...}, "topic": {...}}."""
    def run(cls: str) -> str:
        return docker("run", "--rm", "--network", "none", "--entrypoint", "java", image_ref,
                      "-cp", "/opt/kafka/libs/*", cls, timeout=180).stdout
    out = docker("run", "--rm", "--network", "none", "--entrypoint", "sh", image_ref, "-c",
                 "ls /opt/kafka/libs | grep -m1 '^kafka_'", timeout=60).stdout
    version = re.search(r"kafka_[0-9.]+-(.+?)\.jar", out)
    return {"version": version.group(1) if version else None,
            **{kind: parse_configdef(run(cls)) for kind, cls in CLASSES.items()}}


def write(generation: str, entry: dict[str, Any], path: Path = VALUES_FILE) -> None:
    """Put one version's entry into the committed file, one config a line (readable diffs)."""
    data = json.loads(path.read_text()) if path.exists() else {}
    versions = dict(data.get("versions", {}), **{generation: entry})
    blocks = []
    for name, v in sorted(versions.items()):
        if "same" in v:
            blocks.append(f'  {json.dumps(name)}: {json.dumps(v)}')
            continue
        parts = [f'"version": {json.dumps(v["version"])}']
        for kind in ("broker", "topic"):
            rows = ",\n".join(f"    {json.dumps(k)}: {json.dumps(e)}" for k, e in v[kind].items())
            parts.append(f'"{kind}": {{\n{rows}\n   }}')
        blocks.append(f'  {json.dumps(name)}: {{' + ",\n   ".join(parts) + "}")
    about = ("Kafka config types and valid values by version, from its ConfigDefs: "
             "python -m harness.brokers.kafka.values")
    path.write_text('{"about": ' + json.dumps(about) + ',\n "versions": {\n' + ",\n".join(blocks) + "\n}}\n")
    _values.cache_clear()


def main(argv: list[str] | None = None) -> None:
    """Regenerate one version's entry: from a built image (--image), or from ConfigDef's HTML
    (--html BROKER TOPIC: generated/kafka_config.html and topic_config.html of its docs)."""
    ap = argparse.ArgumentParser(prog="python -m harness.brokers.kafka.values")
    ap.add_argument("generation", help="the harness's version name (3.9, 4.1)")
    ap.add_argument("--image", help="a built image, e.g. mqchaos/kafka:latest")
    ap.add_argument("--html", nargs=2, metavar=("BROKER", "TOPIC"), help="ConfigDef HTML files (instead of an image)")
    ap.add_argument("--kafka-version", help="with --html: Kafka's version, e.g. 3.9.1")
    ap.add_argument("--same", help="the version runs this version's image (3.9-kraft: 3.9)")
    a = ap.parse_args(argv)
    if a.same:
        entry: dict[str, Any] = {"same": a.same}
    elif a.image:
        entry = dump(a.image)
    else:
        broker, topic = (Path(p).read_text(encoding="utf-8") for p in a.html)
        entry = {"version": a.kafka_version, "broker": parse_configdef(broker), "topic": parse_configdef(topic)}
    write(a.generation, entry)
    print(f"{VALUES_FILE}: {a.generation} {entry.get('version', entry.get('same'))}")


if __name__ == "__main__":
    with entry_point():
        setup_logging()
        main()
