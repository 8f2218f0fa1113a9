"""One codec for a group's state: the topic index's ``G`` rows and the ``"groups"`` section
of a topic snapshot (version 4) both store ``encode_group``'s map (MessagePack-ready).

Layout (``v`` 1): ``name``, ``mode``, ``topics``, ``pattern``, ``created``, ``options`` (the
queue options map), ``positions`` ``{topic: [index, position, metadata, committed_at_ms,
member]}``, ``cursors`` ``{topic: [index, position]}``, ``leases`` ``[[topic, index,
position, member, deadline_ms, deliveries], ...]``, ``waiting`` and ``dead`` ``[[topic,
index, position, deliveries, reason], ...]``, ``stats`` ``[delivered, acked, redelivered,
dead_lettered]``. Lists keep their order, so a restored table iterates as the original did.
"""

from __future__ import annotations

from typing import Any, Final

from raftlog.topics.groups.model import GroupPosition, GroupStats, check_options, options_map
from raftlog.topics.groups.table import Group, Lease
from raftlog.topics.records import RecordId

GROUP_STATE_VERSION: Final = 1


class GroupStateError(ValueError):
    """Stored group state this code cannot read."""


def encode_group(group: Group) -> dict[str, Any]:
    """The map of ``group`` (module docstring)."""
    s = group.stats
    return {
        "v": GROUP_STATE_VERSION,
        "name": group.name,
        "mode": group.mode,
        "topics": list(group.topics),
        "pattern": group.pattern,
        "created": group.created_index,
        "options": options_map(group.options),
        "positions": {
            t: [p.next_record.index, p.next_record.position, p.metadata, p.committed_at_ms,
                p.member]
            for t, p in group.positions.items()
        },
        "cursors": {t: [c.index, c.position] for t, c in group.cursors.items()},
        "leases": [
            [t, r.index, r.position, lease.member, lease.deadline_ms, lease.deliveries]
            for (t, r), lease in group.leases.items()
        ],
        "waiting": [[t, r.index, r.position, n, why] for (t, r), (n, why) in group.waiting.items()],
        "dead": [[t, r.index, r.position, n, why] for (t, r), (n, why) in group.dead.items()],
        "stats": [s.delivered, s.acked, s.redelivered, s.dead_lettered],
    }


def decode_group(body: object) -> Group:
    """A group from ``encode_group``'s map (``GroupStateError`` when unreadable)."""
    try:
        if not isinstance(body, dict) or body.get("v") != GROUP_STATE_VERSION:
            raise GroupStateError("unreadable group state version")
        group = Group(
            str(body["name"]), body["mode"], tuple(body["topics"]), body["pattern"],
            int(body["created"]), check_options(dict(body["options"])),
        )
        for topic, (index, position, metadata, at, member) in body["positions"].items():
            group.positions[topic] = GroupPosition(RecordId(index, position), metadata, at, member)
        for topic, (index, position) in body["cursors"].items():
            group.cursors[topic] = RecordId(index, position)
        for topic, index, position, member, deadline, deliveries in body["leases"]:
            group.leases[(topic, RecordId(index, position))] = Lease(member, deadline, deliveries)
        for topic, index, position, deliveries, reason in body["waiting"]:
            group.waiting[(topic, RecordId(index, position))] = (deliveries, reason)
        for topic, index, position, deliveries, reason in body["dead"]:
            group.dead[(topic, RecordId(index, position))] = (deliveries, reason)
        group.stats = GroupStats(*(int(n) for n in body["stats"]))
        if group.mode not in ("stream", "queue"):
            raise GroupStateError(f"unknown group mode {group.mode!r}")
        return group
    except (KeyError, TypeError, ValueError) as exc:
        raise GroupStateError(f"unreadable group state: {exc}") from None
