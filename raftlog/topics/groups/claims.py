"""One active member per topic of a stream group, with failover (issue #27).

A member *claims* a topic of a stream group (group command ``claim``); the claim lasts the
group's ``ack_wait_ms`` on the log clock and is renewed by claiming again. While it holds,
another member's claim is refused by the leader (``TopicClaimed``) and ignored at apply,
and so is a commit that names another member -- a member that lost its claim (it stalled
past the deadline and another took over) cannot move the position back. When the holder
stops renewing (it crashed), its claim runs out and the next member's claim succeeds: the
failover. ``release`` ends a claim at once (a member that stops cleanly). Commits without a
member name, and topics nobody claimed, are not affected.
"""

from __future__ import annotations

from typing import Any

from raftlog.errors import TopicError
from raftlog.topics.groups.model import check_member
from raftlog.topics.records import TOPIC_NAME_RE, RecordFormatError


def claim_args(args: dict[Any, Any]) -> dict[str, Any]:
    """The normalised args of ``claim`` / ``release``: ``topic``, ``member``."""
    topic = args.get("topic")
    if not isinstance(topic, str) or not TOPIC_NAME_RE.fullmatch(topic):
        raise RecordFormatError(f"invalid topic name {repr(topic)[:80]}", "InvalidTopicName")
    return {"topic": topic, "member": check_member(args.get("member"))}


def holder(owners: dict[str, tuple[str, int]], topic: str, now: int) -> str | None:
    """Who holds ``topic`` at log clock ``now`` (None: nobody, or the claim ran out)."""
    owner = owners.get(topic)
    return None if owner is None or owner[1] <= now else owner[0]


Owners = dict[str, tuple[str, int]]


def refusal(owners: Owners, args: dict[str, Any], now: int) -> TopicError | None:
    """Why a claim or a member's commit must wait: another member holds the topic."""
    member = args.get("member")
    current = holder(owners, args["topic"], now)
    if member is None or current is None or current == member:
        return None
    return TopicError("TopicClaimed", f"topic {args['topic']!r} is claimed by {current!r}")


def apply_claim(
    owners: dict[str, tuple[str, int]], op: str, args: dict[str, Any], now: int, ttl_ms: int
) -> None:
    """Apply ``claim`` or ``release`` (module docstring)."""
    topic, member = args["topic"], args["member"]
    current = holder(owners, topic, now)
    if op == "claim" and current in (None, member):
        owners[topic] = (member, now + ttl_ms)
    elif op == "release" and current == member:
        del owners[topic]
