"""What a broker plug-in's clients and probes get of a run: a frozen context.

Jepsen threads one test map through ``run!`` and hands it to every client's ``open!`` /
``setup!`` / ``invoke!``; the clients never see the runner. Here the run loop
(harness.runner) builds one ``RunContext`` once the cluster is up and passes it to
``Broker.declare / producers / consumers / prefill / drain / probes``. The plug-ins read it
and return workers; they assign nothing on the run, and nothing on the run but what the
context offers is theirs to call.
"""
from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.clients.base import Worker
from harness.history import JsonlWriter, RunClock

# an action of the harness's own on the cluster: (action, target nodes, details, the act)
Operator = Callable[[str, list[str], dict, Callable[[], object]], object]
# starts counting the bytes each node receives from each other node; returns the reader
CountLinks = Callable[[], Callable[[], dict[str, dict[str, int]]]]


@dataclass(frozen=True)
class RunContext:
    """One run as its plug-in sees it.

    ``sc``        the scenario (the plug-in's own scenario model)
    ``cluster``   the running cluster (harness.brokers.protocol.Cluster)
    ``clock``     the run's clock: every history record's time
    ``stop``      set when the run ends: every worker stops
    ``dir``       the run directory (a probe's own files go below it)
    ``writer``    ``writer(kind, who)``: the history file a worker appends to
    ``count_links``  starts counting traffic between nodes (a probe's evidence)
    ``operator``  runs an action of the harness's own on the cluster, recorded as an
                  operator event (never counted as the broker's behaviour)
    ``consumers`` the load's consumers running now (a probe reads their counters)
    """
    sc: Any
    cluster: Any
    clock: RunClock
    stop: threading.Event
    dir: Path
    writer: Callable[[str, str], JsonlWriter]
    count_links: CountLinks
    operator: Operator
    consumers: Callable[[], list[Worker]] = field(default=lambda: [])


@dataclass(frozen=True)
class Drained:
    """What ``Broker.drain`` returns: its record for run.json (``{"complete": bool,
    "seconds": ...}``) and every reader that read during the drain (the load's consumers it
    was given and any it started), which the run loop joins and accounts for."""
    record: dict
    readers: list[Worker]
