"""A broker's ``cluster:`` block as a typed model (``Settings``) and the broker's own
configuration names it checks other keys against.

Each plug-in ships config-keys.json: the names its broker accepts, dumped from the broker
itself when its image is built (``Broker.dump_config_keys``; a test compares the two), so a
typo is refused before a run rather than silently ignored by the broker.
"""
from __future__ import annotations

import difflib
import json
import re
from functools import cache
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator


@cache
def config_keys(path: str, kind: str) -> tuple[str, ...]:
    return tuple(json.loads(Path(path).read_text())[kind])


@cache
def _key_pattern(path: str, kind: str) -> re.Pattern:
    """Names with placeholders (RabbitMQ's schema: ``...nodes.$name``) match any segment."""
    alts = [re.sub(r"\\\$[A-Za-z_]+", "[^.]+", re.escape(k)) for k in config_keys(path, kind)]
    return re.compile("^(?:" + "|".join(alts) + ")$")


def known_key(path: str, kind: str, key: str) -> bool:
    return bool(_key_pattern(path, kind).match(key))


def closest(key: str, names: list[str] | tuple[str, ...]) -> str:
    near = difflib.get_close_matches(key, names, n=1, cutoff=0.6)
    return f" (did you mean {near[0]!r}?)" if near else ""


def raw_text(value: Any) -> str:
    """A raw configuration line's value as the broker spells it: YAML's true / false are
    written lower-case (cuttlefish's enum [true, false] refuses "True")."""
    return str(value).lower() if isinstance(value, bool) else str(value)


def is_boolean(value: Any) -> bool:
    """A boolean as the brokers' own parsers take one: true / false (any case, as text)."""
    return isinstance(value, bool) or (isinstance(value, str) and value.strip().lower() in ("true", "false"))


class Settings(BaseModel):
    """A broker's ``cluster:`` block: typed fields (or the broker's own names for them, in
    ``aliases``); any other key must be one of the broker's own configuration names
    (``keys_file``) and goes to ``extra``, rendered as a raw line; a deliberate raw line
    the broker does not list goes under ``extra:`` explicitly."""
    model_config = ConfigDict(extra="forbid")
    aliases: ClassVar[dict[str, str]] = {}
    keys_file: ClassVar[Path | None] = None    # the plug-in's config-keys.json
    broker: ClassVar[str] = ""

    extra: dict[str, str] = Field(default_factory=dict)
    healthy_timeout: float = 120.0
    # The broker's version (a name of ``Broker.generations``): set by the harness from
    # --version, the scenario's ``version:`` or the environment (``choose_version``), never
    # written in a ``cluster:`` block; it picks the image and what the rendering leaves out.
    version: str | None = Field(None, exclude=True)  # recorded as the scenario's version
    # "lazy": the data directories forget what was never fsynced at a power loss
    # (nemesis/lazyfs.py); a scenario with a power_loss fault gets it unless it says "plain"
    fs: Literal["plain", "lazy"] | None = None
    # with fs: lazy, unsynced writes this old count as written back (the kernel's periodic
    # writeback, 30 s on Linux); None: never (the worst case, LazyFS's model)
    fs_writeback_s: float | None = Field(None, gt=0)

    @model_validator(mode="before")
    @classmethod
    def _raw_keys_to_extra(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        names = set(cls.model_fields) - {"extra"}
        known: dict[str, Any] = {}
        extra = {k: raw_text(v) for k, v in (data.get("extra") or {}).items()}
        unknown = []
        for k, v in data.items():
            key = cls.aliases.get(k, k.replace("-", "_"))
            if k == "extra":
                continue
            if key in names:
                if cls.model_fields[key].annotation is bool and not is_boolean(v):
                    # pydantic would read yes / on / 1 as true; the broker itself takes only
                    # true or false, so anything else is a mistake, not a spelling
                    unknown.append(f"{k!r}: {v!r} is not a boolean (true or false)")
                known[key] = v
            elif cls.keys_file is None or known_key(str(cls.keys_file), "broker", k):
                extra[k] = raw_text(v)
            else:
                choices = sorted(names | set(cls.aliases)) + list(config_keys(str(cls.keys_file), "broker"))
                unknown.append(f"{k!r} is neither a setting of the harness nor a {cls.broker} "
                               f"configuration name{closest(k, choices)}; a deliberate raw line goes under extra:")
        if unknown:
            raise ValueError("; ".join(unknown))
        return {**known, "extra": extra}

    @classmethod
    def from_settings(cls, settings: dict[str, Any]) -> "Settings":
        return cls.model_validate(settings)

