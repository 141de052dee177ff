"""The values RabbitMQ accepts, checked before a run (issue 34, "values validated").

Three sources, each the server's own:

- rabbitmq.conf: the cuttlefish schema files the server ships (``{mapping, "name", ..., [
  {datatype, ...}, {validators, [...]}]}``). ``parse_schema`` reads them into
  config-values.json (one entry per version: ``dump`` reads them from a built image, ``main``
  from schema files), and ``conf_problem`` judges a value as cuttlefish would.
- what the schema declares a plain string but the server itself checks (``SERVER_CHECKED``:
  ``queue_master_locator: min-master`` passes the schema, then fails every classic queue's
  declaration on 3.10 and falls back to client-local on 4.x).
- policies and queue arguments: the policy validators (rabbit_policies.erl,
  rabbit_mirror_queue_misc.erl and its ha-mode modules) and the argument checks of
  rabbit_amqqueue.erl, at v3.10.8, restated in ``policy_problems`` / ``argument_problems``.
"""
from __future__ import annotations

import argparse
import json
import re
from functools import cache
from pathlib import Path
from typing import Any

from harness.brokers.containers import docker
from harness.util import entry_point, setup_logging

VALUES_FILE = Path(__file__).with_name("config-values.json")

# ---- reading the cuttlefish schema ------------------------------------------------------------

_MAPPING = re.compile(r'\{mapping,\s*"([^"]+)"\s*,\s*"[^"]*"\s*,\s*\[(.*?)\]\s*\}\s*\.', re.S)
_TERM = re.compile(r"\s*(?:(?P<open>[\[{])|(?P<close>[\]}])|(?P<comma>,)|'(?P<qatom>[^']*)'|"
                   r'"(?P<str>[^"]*)"|(?P<word>[\w.@+-]+))')


def _term(text: str, pos: int = 0) -> tuple[Any, int]:
    """One Erlang term of a datatype (atoms, tuples, lists; enough for ``{enum, [a, b]}``):
    a tuple becomes a Python tuple, a list a list, an atom its name."""
    m = _TERM.match(text, pos)
    if not m or m.group("close") or m.group("comma"):
        raise ValueError(f"not a term at {text[pos:pos + 30]!r}")
    if not m.group("open"):
        return next(v for k, v in m.groupdict().items() if v is not None and k not in ("open", "close")), m.end()
    items: list = []
    closing, pos = {"[": "]", "{": "}"}[m.group("open")], m.end()
    while True:
        m = _TERM.match(text, pos)
        if m and m.group("close"):
            return (items if closing == "]" else tuple(items)), m.end()
        if m and m.group("comma"):
            pos = m.end()
            continue
        item, pos = _term(text, pos)
        items.append(item)


def _prop(body: str, name: str) -> Any:
    """The value of ``{name, TERM}`` in a mapping's property list, None when absent."""
    m = re.search(r"\{\s*" + name + r"\s*,", body)
    if not m:
        return None
    try:
        return _term(body, m.end())[0]
    except (ValueError, StopIteration):
        return "?"  # a term this reader does not follow: the value is not judged


def _datatype(term: Any) -> list:
    """A datatype as JSON: "integer", {"enum": [...]}, {"atom": "infinity"}, {"duration": "ms"} ...;
    a list of them (the schema's list of alternatives)."""
    if term is None:
        return ["string"]  # cuttlefish's default datatype
    out = []
    for t in term if isinstance(term, list) else [term]:
        if isinstance(t, tuple) and len(t) == 2:
            out.append({str(t[0]): list(t[1]) if isinstance(t[1], list) else t[1]})
        else:
            out.append(t if isinstance(t, str) else "?")
    return out


def parse_schema(text: str) -> dict[str, dict]:
    """{name: {"datatype": [...], "validators": [...]}} for every mapping of the schema text
    (several files concatenated); comment lines are dropped first (a mapping shown in a
    comment is not one)."""
    text = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("%"))
    out: dict[str, dict] = {}
    for name, body in _MAPPING.findall(text):
        entry: dict[str, Any] = {"datatype": _datatype(_prop(body, "datatype"))}
        validators = _prop(body, "validators")
        if isinstance(validators, list) and validators:
            entry["validators"] = validators
        out[name] = entry
    return dict(sorted(out.items()))


# ---- judging a value ----------------------------------------------------------------------------

_INT = re.compile(r"^-?\d+$")
_DURATION = re.compile(r"^(?:\d+(?:\.\d+)?(?:f|w|d|h|ms|m|s))+$")
_BYTESIZE = re.compile(r"^\d+(?:[kKmMgGtT][iI]?[bB]?|[bB])?$")
# cuttlefish's own validators the schemas name, on integers (the schema's {validator, ...}
# funs: rabbit.schema); the others (file_accessible, dir_writable, uri ...) judge the
# container's file system or free text and are left to the node
_VALIDATORS = {"non_negative_integer": (0, None), "non_zero_positive_integer": (1, None),
               "byte": (0, 255), "port": (1, 65535)}
_QUALIFIED = {"positive": (1, None), "non_negative": (0, None)}


def _fits(datatype: Any, value: str) -> bool:
    if isinstance(datatype, dict):
        (kind, arg), = datatype.items()
        if kind == "enum":
            return value in [str(a) for a in arg]
        if kind == "atom":
            return value == str(arg)
        if kind == "duration":
            return bool(_INT.match(value) or _DURATION.match(value))
        if kind == "percent":
            return bool(re.match(r"^\d+(?:\.\d+)?%$", value))
        if kind == "integer":
            low, high = _QUALIFIED.get(str(arg), (None, None))
            return bool(_INT.match(value)) and (low is None or int(value) >= low)
        return True
    if datatype == "integer":
        return bool(_INT.match(value))
    if datatype == "float":
        return bool(re.match(r"^-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?$", value))
    if datatype in ("boolean",):
        return value in ("true", "false")
    if datatype == "flag":
        return value in ("on", "off", "true", "false")
    if datatype == "bytesize":
        return bool(_BYTESIZE.match(value))
    return True  # string, atom, ip, file, directory, binary ...: any text


def _shown(datatype: Any) -> str:
    if isinstance(datatype, dict):
        (kind, arg), = datatype.items()
        if kind == "enum":
            return "one of " + ", ".join(map(str, arg))
        if kind == "atom":
            return str(arg)
        return f"{kind} ({arg})" if kind != "integer" else f"a {arg} integer"
    return {"integer": "an integer", "float": "a number", "boolean": "true or false", "flag": "on or off",
            "bytesize": "a size (bytes, or with KB / MB / GB)"}.get(datatype, str(datatype))


def conf_problem(entry: dict, value: str) -> str | None:
    """Why cuttlefish would refuse ``value`` for a mapping (None: it takes it)."""
    types = entry.get("datatype", ["string"])
    if not any(_fits(t, value) for t in types):
        return f"{value!r} is not {' or '.join(_shown(t) for t in types)}"
    if _INT.match(value):
        for name in entry.get("validators", []):
            low, high = _VALIDATORS.get(name, (None, None))
            if (low is not None and int(value) < low) or (high is not None and int(value) > high):
                return f"{value} is out of range ({name}: {low}..{'' if high is None else high})"
    return None


# ---- what the server checks beyond its schema --------------------------------------------------

# queue_master_locator / queue_leader_locator are `string` in every schema; the server checks
# them. 3.10: rabbit_queue_location_validator (the registered locators) and
# rabbit_queue_location's QUEUE_LEADER_LOCATORS; 4.0/4.3: rabbit_queue_location's
# QUEUE_LEADER_LOCATORS for both (the deprecated values mapped to balanced; anything else
# silently becomes client-local, another configuration than the one written).
_LEADER_3 = ("client-local", "balanced", "random", "least-leaders")
_LEADER_4 = ("client-local", "balanced", "random", "least-leaders", "min-masters")
SERVER_CHECKED = {
    "3.10": {"queue_master_locator": ("min-masters", "client-local", "random"),
             "queue_leader_locator": _LEADER_3},
    "4.0": {"queue_master_locator": _LEADER_4, "queue_leader_locator": _LEADER_4},
    "4.3": {"queue_master_locator": _LEADER_4, "queue_leader_locator": _LEADER_4},
}


@cache
def _values(path: str) -> dict:
    return json.loads(Path(path).read_text())


def schema(version: str) -> dict | None:
    """The version's schema entries ({name: entry}) from the committed config-values.json; None
    when the file has no entry for it (then nothing is judged by it)."""
    entry = _values(str(VALUES_FILE)).get("versions", {}).get(version)
    return entry["conf"] if entry else None


def _entry(conf: dict, key: str) -> dict | None:
    """The mapping for ``key``; a ``$name`` segment stands for any one segment."""
    if key in conf:
        return conf[key]
    parts = key.split(".")
    return next((e for name, e in conf.items() if len(name.split(".")) == len(parts)
                 and all(a == b or a.startswith("$") for a, b in zip(name.split("."), parts))), None)


def value_problem(version: str, key: str, value: str) -> str | None:
    """Why RabbitMQ ``version`` would refuse (or silently replace) ``key = value`` in
    rabbitmq.conf; None when it takes it or the key is not in the version's schema."""
    allowed = SERVER_CHECKED.get(version, {}).get(key)
    if allowed and value not in allowed:
        return f"{value!r} is not one of {', '.join(allowed)} (RabbitMQ {version})"
    conf = schema(version)
    entry = _entry(conf, key) if conf else None
    return conf_problem(entry, value) if entry else None


def unknown_key(version: str, key: str, default: str = "3.10") -> bool:
    """Is ``key`` a name the default version's schema has and ``version``'s no longer has (the
    node refuses to boot with a name its schema lacks)? Names from schema files outside the
    server's source tree (cuttlefish's erlang.*) are in neither and judged by config-keys.json."""
    conf, base = schema(version), schema(default)
    return conf is not None and base is not None and _entry(base, key) is not None and _entry(conf, key) is None


# ---- policies and queue arguments (the policy validators) --------------------------------------

_HA_CHOICES = {"ha-sync-mode": ("manual", "automatic"), "ha-promote-on-shutdown": ("always", "when-synced"),
               "ha-promote-on-failure": ("always", "when-synced")}
_POLICY_CHOICES = {**_HA_CHOICES, "queue-mode": ("default", "lazy"), "queue-version": (1, 2),
                   "overflow": ("drop-head", "reject-publish", "reject-publish-dlx"),
                   "dead-letter-strategy": ("at-most-once", "at-least-once"),
                   "queue-master-locator": ("min-masters", "client-local", "random"),
                   "queue-leader-locator": _LEADER_3}
# rabbit_policies:validate_policy0: integers with their least value
_POLICY_INTS = {"message-ttl": 0, "expires": 1, "max-length": 0, "max-length-bytes": 0,
                "max-in-memory-length": 0, "max-in-memory-bytes": 0, "delivery-limit": 0,
                "initial-cluster-size": 0, "stream-max-segment-size-bytes": 0, "ha-sync-batch-size": 1}
_POLICY_TEXT = ("alternate-exchange", "dead-letter-exchange", "dead-letter-routing-key", "max-age")


def _integer(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _ha_params_problem(mode: Any, params: Any, nodes: list[str]) -> str | None:
    """The ha-mode module's own validate_policy (all, exactly, nodes)."""
    if mode == "all":
        return None if params is None else "ha-params: ha-mode all takes no parameters"
    if mode == "exactly":
        return None if _integer(params) and params > 0 else f"ha-params: ha-mode exactly takes an integer > 0, not {params!r}"
    if not isinstance(params, list) or not params or not all(isinstance(n, str) for n in params):
        return f"ha-params: ha-mode nodes takes a non-empty list of node names, not {params!r}"
    # a node outside the cluster would never hold a mirror: the policy would not mean what it says
    stray = [n for n in params if n.split("@")[-1] not in nodes]
    return f"ha-params: {', '.join(stray)} not a node of this cluster ({', '.join(nodes)})" if stray else None


def policy_problems(policy: dict[str, Any], nodes: list[str]) -> list[str]:
    """What ``rabbitmqctl set_policy`` would refuse in a policy definition (3.10's validators:
    mirroring needs them), each naming its key."""
    out = []
    mode = policy.get("ha-mode")
    if any(k.startswith("ha-") for k in policy) and mode is None:
        out.append("ha-mode must be given with ha-params, ha-sync-mode or ha-promote-on-*")
    elif mode is not None and mode not in ("all", "exactly", "nodes"):
        out.append(f"ha-mode: {mode!r} is not all, exactly or nodes")
    elif mode is not None and (p := _ha_params_problem(mode, policy.get("ha-params"), nodes)):
        out.append(p)
    for key, value in policy.items():
        if key in ("ha-mode", "ha-params"):
            continue
        if key in _POLICY_CHOICES and value not in _POLICY_CHOICES[key]:
            out.append(f"{key}: {value!r} is not one of {', '.join(map(str, _POLICY_CHOICES[key]))}")
        elif key in _POLICY_INTS and not (_integer(value) and value >= _POLICY_INTS[key]):
            out.append(f"{key}: {value!r} is not an integer >= {_POLICY_INTS[key]}")
        elif key in _POLICY_TEXT and not isinstance(value, (str, int)):
            out.append(f"{key}: {value!r} is not a string")
        elif key not in (*_POLICY_CHOICES, *_POLICY_INTS, *_POLICY_TEXT):
            out.append(f"{key}: not a policy key RabbitMQ validates (the policy would be refused)")
    return out


# rabbit_amqqueue:declare_args / consume_args checks (x-queue-type is the queue's type: field)
_ARG_INTS = {"x-expires": 1, "x-message-ttl": 0, "x-max-length": 0, "x-max-length-bytes": 0,
             "x-max-priority": 0, "x-quorum-initial-group-size": 1, "x-initial-cluster-size": 1,
             "x-max-in-memory-length": 0, "x-max-in-memory-bytes": 0, "x-stream-max-segment-size-bytes": 1}
_ARG_CHOICES = {"x-overflow": ("drop-head", "reject-publish", "reject-publish-dlx"),
                "x-queue-mode": ("default", "lazy"), "x-queue-version": (1, 2),
                "x-queue-master-locator": ("min-masters", "client-local", "random"),
                "x-queue-leader-locator": _LEADER_3}


def argument_problems(arguments: dict[str, Any], queue_type: str) -> list[str]:
    """What a queue.declare with these arguments would be refused for (PRECONDITION_FAILED),
    or where the arguments would contradict the queue's type."""
    out = []
    for key, value in arguments.items():
        if key == "x-queue-type" and value != {"mirrored": "classic"}.get(queue_type, queue_type):
            out.append(f"{key}: {value!r} contradicts type: {queue_type} (the type is the queue's type: field)")
        elif key in _ARG_INTS and not (_integer(value) and value >= _ARG_INTS[key]):
            out.append(f"{key}: {value!r} is not an integer >= {_ARG_INTS[key]}")
        elif key == "x-max-priority" and _integer(value) and value > 255:
            out.append(f"{key}: {value} is above 255")
        elif key in _ARG_CHOICES and value not in _ARG_CHOICES[key]:
            out.append(f"{key}: {value!r} is not one of {', '.join(map(str, _ARG_CHOICES[key]))}")
        elif key == "x-single-active-consumer" and not isinstance(value, bool):
            out.append(f"{key}: {value!r} is not a boolean")
    if queue_type == "quorum" and arguments.get("x-overflow") == "reject-publish-dlx":
        out.append("x-overflow: reject-publish-dlx is for classic queues (a quorum queue refuses it)")
    return out


# ---- the dump (from a built image) and the committed file ---------------------------------------

SCHEMAS = "find /usr/lib/rabbitmq -name '*.schema' -path '*priv*' | sort"


def dump(image_ref: str) -> dict[str, Any]:
    """The schema entries of the rabbitmq-server in ``image_ref`` (the files the key dump
    reads): {"version": "3.10.8", "conf": {...}}."""
    script = f"cat $({SCHEMAS}); echo; echo VERSION $(ls /usr/lib/rabbitmq/lib | sed -n 's/^rabbitmq_server-//p')"
    out = docker("run", "--rm", "--network", "none", "--entrypoint", "sh", image_ref, "-c", script,
                 timeout=120).stdout
    version = re.search(r"^VERSION (\S+)", out, re.M)
    return {"version": version.group(1) if version else None, "conf": parse_schema(out)}


def write(generation: str, entry: dict[str, Any], path: Path = VALUES_FILE) -> None:
    """Put one version's entry into the committed file, one key a line (readable diffs)."""
    data = json.loads(path.read_text()) if path.exists() else {}
    versions = dict(data.get("versions", {}), **{generation: entry})
    data = {"about": "rabbitmq.conf datatypes by version, from the server's cuttlefish schemas: "
                     "python -m harness.brokers.rabbitmq.values",
            "versions": dict(sorted(versions.items()))}
    lines = []
    for name, v in data["versions"].items():
        conf = ",\n".join(f"   {json.dumps(k)}: {json.dumps(e)}" for k, e in v["conf"].items())
        lines.append(f'  {json.dumps(name)}: {{"version": {json.dumps(v["version"])}, "conf": {{\n{conf}\n  }}}}')
    path.write_text('{"about": ' + json.dumps(data["about"]) + ',\n "versions": {\n' + ",\n".join(lines) + "\n}}\n")
    _values.cache_clear()


def main(argv: list[str] | None = None) -> None:
    """Regenerate one version's entry: from a built image (--image), or from schema files
    (--schemas: the rabbitmq-server source tree's deps/*/priv/schema/*.schema at the tag)."""
    ap = argparse.ArgumentParser(prog="python -m harness.brokers.rabbitmq.values")
    ap.add_argument("generation", help="the harness's version name (3.10, 4.0, 4.3)")
    ap.add_argument("--image", help="a built image, e.g. mqchaos/rabbitmq:latest")
    ap.add_argument("--schemas", nargs="*", help="schema files (instead of an image)")
    ap.add_argument("--server-version", help="with --schemas: the server's version, e.g. 3.10.8")
    a = ap.parse_args(argv)
    if a.image:
        entry = dump(a.image)
    else:
        text = "\n".join(Path(p).read_text(encoding="utf-8") for p in sorted(a.schemas or []))
        entry = {"version": a.server_version, "conf": parse_schema(text)}
    write(a.generation, entry)
    print(f"{VALUES_FILE}: {a.generation} ({entry['version']}), {len(entry['conf'])} names")


if __name__ == "__main__":
    with entry_point():
        setup_logging()
        main()
