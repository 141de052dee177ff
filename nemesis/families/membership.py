"""Membership operations (issue 39): a replicated queue's / partition's member removed or
added (capability ``membership``), or a metadata-quorum voter (``quorum_membership``,
KIP-853), as the broker's own tool does it; the members before and after as evidence."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from harness.brokers.capabilities import MEMBERSHIP, QUORUM_MEMBERSHIP, Membership, QuorumMembership, ability
from nemesis.kinds import Ctx, Fault, FaultType, asked_again, prove, real, shown
from nemesis.targets import TargetError, resolve


@dataclass(frozen=True)
class _MemberSet:
    """The members a step changes, as the cluster's ability reads and changes them."""
    name: str  # in messages
    read: Callable[[], list[str]]
    change: Callable[[str, str], None]  # (op: add / remove, node)


def _member_set(ctx: Ctx, f: Fault) -> _MemberSet:
    """The metadata quorum's voters (``*_controller``, KIP-853), else the run's queue /
    topic's members."""
    if f.fault.endswith("_controller"):
        quorum = ability(ctx.cluster, QuorumMembership)
        return _MemberSet("the metadata quorum", quorum.voters, quorum.change_voter)
    if not ctx.subject:
        raise TargetError(f"{f.fault} needs the run's queue or topic")
    members, subject = ability(ctx.cluster, Membership), ctx.subject
    return _MemberSet(subject, lambda: members.members(subject),
                      lambda op, node: members.change_member(op, node, subject))


def plan_member(ctx: Ctx, f: Fault, spec: Any, params: dict) -> None:
    """An operator's membership change (issue 39), not a fault: the run's queue / topic, or
    the controllers, lose (``remove_*``) or gain (``add_*``) the targets' members, as the
    broker's own tool does it; instant, the members before and after as evidence."""
    members = _member_set(ctx, f)
    f.targets = real(ctx, resolve(ctx.cluster, spec, ctx.rng, ctx.subject), f.fault)
    f.details["members_before"] = members.read()
    f.instant = True


def _change_members(ctx: Ctx, f: Fault, params: dict) -> None:
    add, members = f.fault.startswith("add_"), _member_set(ctx, f)

    def ask(node: str) -> None:
        if f.details.get("refused"):  # asked before: a timed-out request may have gone through
            now = _members_now(members)
            if isinstance(now, list) and (node in now) == add:
                return
        members.change("add" if add else "remove", node)

    for node in f.targets:
        try:
            asked_again(ctx, f, lambda n=node: ask(n), float(params.get("retry_s", 0)))
        except Exception:
            # whether the broker made the change anyway (a timed-out request may have): evidence
            f.details["members_after_refusal"] = _members_now(members)
            raise
    after, changed = shown(members.read, lambda now: all((n in now) == add for n in f.targets),
                           float(params.get("timeout", 30)), f"the members of {members.name} to change", 0.5)
    prove(f, {"members_after": list(after or [])}, changed)


def _members_now(members: _MemberSet) -> list[str] | str:
    try:
        return list(members.read())
    except Exception as e:  # noqa: BLE001 - no answer is itself what the record shows
        return f"no answer: {type(e).__name__}: {e}"[:200]


TYPES = (
    FaultType("remove_member", plan_member, _change_members, needs=frozenset({MEMBERSHIP}),
              operation=True,
              does="removes the nodes' members of the run's queue (an operator's change)"),
    FaultType("add_member", plan_member, _change_members, needs=frozenset({MEMBERSHIP}),
              operation=True,
              does="adds members of the run's queue on the nodes (an operator's change)"),
    FaultType("remove_controller", plan_member, _change_members, needs=frozenset({QUORUM_MEMBERSHIP}),
              operation=True, does="removes the nodes from the metadata quorum's voters (KIP-853, an operator's change)"),
    FaultType("add_controller", plan_member, _change_members, needs=frozenset({QUORUM_MEMBERSHIP}),
              operation=True, does="adds the nodes to the metadata quorum's voters (KIP-853, an operator's change)"),
)
