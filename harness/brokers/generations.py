"""The versions of a broker the harness runs (generations), the one rule that picks a run's
version, and the images they are built into.

A plug-in names its generations (``Broker.generations``); ``choose_version`` is the only
place the precedence ``--version`` > scenario > environment > default is written, and
``image_ref`` the only place an image's tag is made from a generation (the cluster's
compose variables and ``mqchaos cluster images`` must agree on it).
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable


@dataclass(frozen=True)
class Generation:
    """One version of a broker: the Debian suite its image is built on, the Dockerfile's
    build arguments (pinned packages, jars), and what it cannot do that the plug-in would
    otherwise ask of it (``lacks``: node-control capabilities and the plug-in's own feature
    names, e.g. RabbitMQ 4.0's ``mirrored_queues``)."""
    name: str                                     # "3.10", "4.0", "3.9-kraft" ...
    suite: str = "bookworm"                       # the base image: debian:<suite>-slim
    build_args: tuple[tuple[str, str], ...] = ()  # Dockerfile ARGs
    lacks: frozenset[str] = frozenset()
    default: bool = False                         # today's image: <repo>:<hash> and <repo>:latest
    # the tag of the image it runs when another generation's (Kafka 3.9 in KRaft mode runs
    # 3.9's image: ""); None: its own, tagged by its name
    tag: str | None = None

    def has(self, feature: str) -> bool:
        return feature not in self.lacks

    def stem(self) -> str:
        """The image's tag stem: "" for today's image (<repo>:<hash>, <repo>:latest)."""
        return "" if self.default else self.name if self.tag is None else self.tag

    def args(self) -> dict[str, str]:
        return dict(self.build_args)


VERSION_SOURCES = ("cli", "scenario", "env", "default")
VERSION_LABEL = "mqchaos.version"  # on the images ``mqchaos images`` builds: the generation


def named_generation(generations: dict[str, Generation], version: str | None) -> Generation:
    """The generation named ``version`` among a plug-in's (None: its default one)."""
    if version is None:
        return next(g for g in generations.values() if g.default)
    return generations[version]


def version_env(broker: str) -> str:
    """The environment variable that picks ``broker``'s version (MQCHAOS_RABBITMQ_VERSION)."""
    return f"MQCHAOS_{broker.upper()}_VERSION"


def choose_version(broker: str, generations: dict[str, Generation], cli: Any = None, scenario: Any = None,
                   env: dict[str, str] | None = None) -> tuple[str, str]:
    """The one rule for a broker's version: ``--version`` over the scenario's ``version:``
    over $MQCHAOS_<BROKER>_VERSION over the default generation. Returns (version, where it
    came from); ValueError naming the source and the versions there are."""
    env = os.environ if env is None else env
    default = next(g.name for g in generations.values() if g.default)
    for source, value in (("cli", cli), ("scenario", scenario), ("env", env.get(version_env(broker)) or None)):
        if value is None:
            continue
        text = version_text(value)
        if text not in generations:
            where = {"cli": "--version", "scenario": "version", "env": version_env(broker)}[source]
            hint = (f"; quote it (version: \"{_quoted_hint(value, generations)}\")"
                    if not isinstance(value, str) and _quoted_hint(value, generations) else "")
            raise ValueError(f"{where}: {value!r} is not a {broker} version the harness runs "
                             f"(one of {', '.join(generations)}){hint}")
        return text, source
    return default, "default"


def version_text(value: Any) -> str:
    """A version as its text (YAML reads ``version: 4.0`` as a number)."""
    return value if isinstance(value, str) else str(value)


def _quoted_hint(value: Any, generations: dict[str, Generation]) -> str | None:
    """The version a number meant: YAML turns 3.10 into 3.1."""
    if isinstance(value, float):
        for name in generations:
            try:
                if float(name) == value:
                    return name
            except ValueError:
                continue
    return None


@dataclass(frozen=True)
class ImageSpec:
    """How ``mqchaos images`` builds a broker's image from compose/<context>/ (once per
    generation, with the generation's build arguments)."""
    repo: str                                   # e.g. mqchaos/rabbitmq
    context: str                                # directory under compose/
    inputs: tuple[str, ...] = ("Dockerfile",)   # files whose content makes the image's tag
    tools: tuple[tuple[str, str], ...] = ()     # (command, Debian package) the preparation needs
    # fills the build context (e.g. jars) for a generation
    prepare: Callable[[Path, Generation], None] | None = None

    def ref(self, generation: Generation, digest: str | None = None) -> str:
        return image_ref(self.repo, generation, digest)


def image_ref(repo: str, generation: Generation, digest: str | None = None) -> str:
    """A generation's image: today's tags (``<repo>:<hash>``, ``<repo>:latest``) for the
    default one, ``<repo>:<version>-<hash>`` and ``<repo>:<version>`` for the others."""
    stem = generation.stem()
    if not stem:
        return f"{repo}:{digest or 'latest'}"
    return f"{repo}:{stem}-{digest}" if digest else f"{repo}:{stem}"

