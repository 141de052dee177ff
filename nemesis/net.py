"""Network faults inside the containers: iptables drops (partitions, packet loss) and tc tbf
(bandwidth).

Every rule lives in one of two dedicated chains, ``MQCHAOS-IN`` (jumped to from INPUT) and
``MQCHAOS-OUT`` (from OUTPUT), and carries the comment ``mqchaos:<fault id>``. So a fault is
removed by deleting exactly the rules it added (they are recorded, in ``iptables -S`` form), and
``clear_node`` removes everything the project ever added without touching Docker's own rules
(the embedded DNS lives in the nat table).

Delay is not offered: the kernel here has no ``sch_netem`` ("Specified qdisc kind is unknown"),
and iptables can only drop, not hold, packets. Delay would need a userspace proxy on the client
path; that is out of scope.
"""
from __future__ import annotations

import shlex
from typing import TYPE_CHECKING, Callable, Iterable, Mapping

from nemesis.grudge import CLIENTS

if TYPE_CHECKING:  # types only: importing this module stays as light as it was
    from harness.brokers.protocol import Cluster, NodeAccess

CHAIN_IN = "MQCHAOS-IN"
CHAIN_OUT = "MQCHAOS-OUT"
TAG = "mqchaos"
JUMPS = (("INPUT", CHAIN_IN), ("OUTPUT", CHAIN_OUT))
IPT = ["iptables", "-w", "5"]

Rules = dict[str, list[str]]  # node -> rule specs ("CHAIN -s addr ... -j DROP"), as recorded


def _tag(fault_id: str) -> list[str]:
    return ["-m", "comment", "--comment", f"{TAG}:{fault_id}"]


def _drop(chain: str, direction: str, addr: str, fault_id: str, probability: float | None,
          match: list[str] = ()) -> str:
    stat = [] if probability is None else ["-m", "statistic", "--mode", "random",
                                           "--probability", f"{probability:g}"]
    return shlex.join([chain, direction, f"{addr}/32", *match, *stat, *_tag(fault_id), "-j", "DROP"])


def port_matches(ports: Iterable[int] = ()) -> list[list[str]]:
    """What a cut drops on a link: every packet ([[]]), or, per port, the TCP packets to it
    and from it (a connection to that port in either direction, requests and replies)."""
    return [["-p", "tcp", flag, str(int(port))] for port in sorted(set(ports))
            for flag in ("--dport", "--sport")] or [[]]


def _per_link(grudge: Mapping[str, Iterable[str]], addr_of: Callable[[str], str],
              link_specs: Callable[[str, str], list[str]]) -> Rules:
    """Rules on each node of a map node -> peers, ``link_specs(peer, addr)`` per peer (the
    counting rules; a grudge's drops go through ``_per_end``, which knows the direction).
    The ``clients`` pseudo-node carries no rules: its side of the cut is the node's."""
    rules: Rules = {}
    for node, peers in sorted(grudge.items()):
        if node == CLIENTS or not peers:
            continue
        rules[node] = [spec for peer in sorted(peers) for spec in link_specs(peer, addr_of(peer))]
    return rules


def _per_end(grudge: Mapping[str, Iterable[str]], addr_of: Callable[[str], str],
             end_specs: Callable[[str, str, bool, bool], list[str]]) -> Rules:
    """Rules on each node for each peer it shares a grudged link with:
    ``end_specs(peer, addr, inbound, outbound)``, ``inbound`` when the node drops what the peer
    sends, ``outbound`` when the peer drops what the node sends (a grudge is receiver ->
    senders: nemesis/grudge.py). The ``clients`` pseudo-node carries no rules."""
    drops = {n: set(ps) for n, ps in grudge.items()}
    ends: dict[str, set[str]] = {}
    for receiver, senders in drops.items():
        for sender in senders:
            ends.setdefault(receiver, set()).add(sender)
            ends.setdefault(sender, set()).add(receiver)
    rules = {node: [spec for peer in sorted(peers) for spec in end_specs(
                 peer, addr_of(peer), peer in drops.get(node, ()), node in drops.get(peer, ()))]
             for node, peers in sorted(ends.items()) if node != CLIENTS}
    # a node with nothing to drop (a lossy link's receiver) carries no rules, and is not read
    return {node: specs for node, specs in rules.items() if specs}


def partition_rules(grudge: Mapping[str, Iterable[str]], addr_of: Callable[[str], str],
                    fault_id: str, ports: Iterable[int] = ()) -> Rules:
    """Each dropped direction a -> b at both ends: an INPUT drop from a on b and an OUTPUT drop
    to b on a (a symmetric grudge: both on every grudging node, per peer). A one-way grudge
    leaves the other direction's packets alone, so its rules count only the dropped direction
    (its evidence). With ``ports``, only the TCP traffic to or from those ports, the rest of
    the link up (a broker's control traffic cut while its replication goes on: ``Cluster.ports``)."""
    matches = port_matches(ports)
    return _per_end(grudge, addr_of, lambda peer, addr, inbound, outbound: [
        _drop(chain, direction, addr, fault_id, None, m) for m in matches
        for chain, direction, on in ((CHAIN_IN, "-s", inbound), (CHAIN_OUT, "-d", outbound)) if on])


def loss_rules(grudge: Mapping[str, Iterable[str]], addr_of: Callable[[str], str],
               fault_id: str, probability: float) -> Rules:
    """Drop each packet of a grudged direction with ``probability``, once: on the sender's
    OUTPUT (dropping it again at the receiver would square the rate). From ``clients`` the
    receiving node drops inbound, since the host carries no rules."""
    if not 0 < probability <= 1:
        raise ValueError(f"probability must be in (0, 1], not {probability}")
    return _per_end(grudge, addr_of, lambda peer, addr, inbound, outbound: [
        *([_drop(CHAIN_OUT, "-d", addr, fault_id, probability)] if outbound else []),
        *([_drop(CHAIN_IN, "-s", addr, fault_id, probability)] if inbound and peer == CLIENTS else [])])


def apply_script(specs: list[str]) -> str:
    """One shell script per node: create the chains and jumps if missing, then append."""
    lines = ["set -e"]
    for parent, chain in JUMPS:
        jump = shlex.join([parent, *_tag_plain(), "-j", chain])
        lines.append(f"{shlex.join(IPT)} -N {chain} 2>/dev/null || true")
        lines.append(f"{shlex.join(IPT)} -C {jump} 2>/dev/null || {shlex.join(IPT)} -I {parent} 1 "
                     + shlex.join([*_tag_plain(), "-j", chain]))
    lines += [f"{shlex.join(IPT)} -A {spec}" for spec in specs]
    return "\n".join(lines)


def _tag_plain() -> list[str]:
    return ["-m", "comment", "--comment", TAG]


def remove_script(specs: list[str]) -> str:
    # `|| true`: a rule already gone (node restarted: fresh netns) is the state we want.
    return "\n".join(f"{shlex.join(IPT)} -D {spec} 2>/dev/null || true" for spec in specs) or "true"


def clear_script() -> str:
    """Remove every project rule, chain and tbf qdisc from a node (bounded loops)."""
    ipt = shlex.join(IPT)
    lines = []
    for parent, chain in JUMPS:
        jump = shlex.join([parent, *_tag_plain(), "-j", chain])
        lines.append(f"i=0; while [ $i -lt 50 ] && {ipt} -D {jump} 2>/dev/null; do i=$((i+1)); done")
        lines.append(f"{ipt} -F {chain} 2>/dev/null || true")
        lines.append(f"{ipt} -X {chain} 2>/dev/null || true")
    lines.append(f"for d in $({TBF_DEVS}); do tc qdisc del dev $d root 2>/dev/null || true; done")
    return "\n".join(lines)


# Interfaces with a tbf root qdisc: only the nemesis adds one (Docker leaves noqueue).
TBF_DEVS = "tc qdisc show | awk '$2==\"tbf\" && $6==\"root\" {print $5}' 2>/dev/null"
COUNT_RULES = "iptables -w 5 -S 2>/dev/null | grep -c -e mqchaos -e MQCHAOS || true"


def run_script(cluster: NodeAccess, node: str, script: str, check: bool = True, timeout: float = 30) -> str:
    _, out = cluster.exec(node, ["sh", "-c", script], check=check, timeout=timeout)
    return out


def apply_rules(cluster: NodeAccess, rules: Rules) -> None:
    for node, specs in rules.items():
        run_script(cluster, node, apply_script(specs))


def remove_rules(cluster: Cluster, rules: Rules) -> list[str]:
    """Delete exactly these rules; returns the nodes that could not be reached because their
    container is frozen (a stopped node lost its rules with its network namespace)."""
    return [node for node, specs in rules.items() if not _on_live(cluster, node, remove_script(specs))]


def _on_live(cluster: Cluster, node: str, script: str) -> bool:
    if cluster.paused(node):
        return False
    if cluster.running(node):
        run_script(cluster, node, script, check=False)
    return True


LIST_COUNTERS = " ; ".join(f"{shlex.join(IPT)} -L {chain} -v -x -n 2>/dev/null" for chain in (CHAIN_IN, CHAIN_OUT))


def parse_dropped(listing: str, fault_id: str) -> int:
    """Packets matched by the fault's rules in an ``iptables -L -v -x -n`` listing (each
    rule line starts with its packet count and ends with its comment)."""
    mark = f"/* {TAG}:{fault_id} */"
    total = 0
    for line in listing.splitlines():
        words = line.split()
        if words and words[0].isdigit() and line.rstrip().endswith(mark):
            total += int(words[0])
    return total


def dropped(cluster: Cluster, rules: Rules, fault_id: str) -> dict[str, int]:
    """Per node, the packets the fault's rules dropped so far (the fault's evidence: a
    partition whose rules matched nothing did not partition anything). Nodes that are
    frozen or down are left out (a restarted node's counters went with its namespace)."""
    out = {}
    for node in rules:
        if cluster.running(node):
            out[node] = parse_dropped(run_script(cluster, node, LIST_COUNTERS, check=False), fault_id)
    return out


BYTES = "bytes"  # the tag of counting rules: mqchaos:bytes:<peer>


def count_rules(nodes: Iterable[str], addr_of: Callable[[str], str]) -> Rules:
    """Rules with no target (they count and let the packet go on to any drop rule after them):
    on each node, one per peer, for the bytes it receives from that peer."""
    nodes = sorted(nodes)
    return _per_link({n: [m for m in nodes if m != n] for n in nodes}, addr_of, lambda peer, addr: [
        shlex.join([CHAIN_IN, "-s", f"{addr}/32", *_tag(f"{BYTES}:{peer}")])])


def parse_bytes(listing: str) -> dict[str, int]:
    """{peer: bytes} from an ``iptables -L -v -x -n`` listing's counting rules (the byte count
    is a rule line's second word)."""
    out: dict[str, int] = {}
    for line in listing.splitlines():
        words = line.split()
        if len(words) > 3 and words[0].isdigit() and words[-1] == "*/" and words[-2].startswith(f"{TAG}:{BYTES}:"):
            peer = words[-2].split(":", 2)[2]
            out[peer] = out.get(peer, 0) + int(words[1])
    return out


def received_bytes(cluster: Cluster, rules: Rules) -> dict[str, dict[str, int]]:
    """Per running node, the bytes received from each peer since its counting rules were
    added (a restarted node lost them with its network namespace: left out)."""
    return {node: parse_bytes(run_script(cluster, node, LIST_COUNTERS, check=False))
            for node in rules if cluster.running(node)}


def clear_node(cluster: NodeAccess, node: str) -> None:
    run_script(cluster, node, clear_script(), check=False)


def project_rules(cluster: NodeAccess, node: str) -> int:
    """How many project rules/chains/qdiscs the node carries (0 after a heal)."""
    out = run_script(cluster, node, f"{COUNT_RULES}; {TBF_DEVS} | wc -l", check=False)
    return sum(int(x) for x in out.split() if x.isdigit())


def default_dev(cluster: NodeAccess, node: str) -> str:
    """The interface towards the cluster network (``eth0`` in practice, but asked)."""
    out = run_script(cluster, node, f"ip -o route get {shlex.quote(cluster.gateway())}")
    words = out.split()
    return words[words.index("dev") + 1]


def tbf_spec(dev: str, rate: str, burst: str, latency: str) -> list[str]:
    return ["dev", dev, "root", "tbf", "rate", rate, "burst", burst, "latency", latency]


def remove_tbf_all(cluster: Cluster, tbf: dict[str, list[str]]) -> list[str]:
    """Delete these root qdiscs; returns the nodes left for later (frozen containers)."""
    return [node for node, spec in tbf.items()
            if not _on_live(cluster, node, shlex.join(["tc", "qdisc", "del", *spec[:3]]) + " 2>/dev/null || true")]
