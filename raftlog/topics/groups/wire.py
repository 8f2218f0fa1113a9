"""Group RPCs (issue #27; docs/protocol.md §10.6 lists them), pure frame codecs.

Changes go through ``TP`` as group commands (topic entry kind 06,
``raftlog.topics.groups.entry``): create, delete, commit, reset, lease, ack, nack. Reads, on
any peer, from its applied group state:

``GD`` describe -- ``[id, "GD", ident, name]`` -> ``[id, 01, json info]``; info:
``{name, mode, topics, pattern, created_index, options, positions {topic: [index, position,
metadata, committed_at_ms, member]}, queue {topic: [cursor index, cursor position, pending,
waiting]}, members {member: leased}, stats [delivered, acked, redelivered, dead_lettered],
applied}``.

``GL`` list -- ``[id, "GL", ident]`` -> ``[id, 01, json [name, ...]]`` (sorted); a request
``[id, "GL", ident, json [name or "prefix*", ...]]`` lists only the groups matching one
(on a CURVE cluster the request guard writes the key's ``consume`` right there).

``GQ`` leased records -- ``[id, "GQ", ident, json {group, member, min_applied?, limit?,
after?, topic?}]`` -> ``[id, 01, json {applied, leases: [[topic, index, position,
deliveries, deadline_ms], ...], more}, record ...]``: the records leased to ``member`` now
(of ``topic`` only, if given), in id order after ``after`` (``[topic, index, position]``;
absent: from the first), one record frame
(``TR``'s layout) per lease, or an empty frame for a record that is gone (retention). One
answer holds at most ``limit`` leases and a topic read's worth of record bytes (4 MiB; a
larger record alone); ``more`` says further leases follow -- ask again ``after`` the last
one. A peer that has not applied ``min_applied`` yet answers ``NotApplied`` (the client asks
again): the lease command's index, so the answer includes what that lease handed out. (An
answer without ``more`` -- a peer before the byte bound -- holds them all.)

Errors: ``[id, "", json {name, message}]`` as for the topic RPCs (``UnknownGroup``, ...).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from raftlog.errors import RemoteProtocolError, TopicError
from raftlog.rpc.frames import TRUE_FRAME, decode_json, json_to_uint, pack_json
from raftlog.topics import wire as rpc
from raftlog.topics.groups.model import (
    GroupInfo,
    GroupPosition,
    GroupStats,
    QueueTopicStats,
    check_group_name,
    check_member,
    check_options,
    options_map,
)
from raftlog.topics.records import MAX_POSITION, MAX_UINT, LoggedRecord, RecordId
from raftlog.topics.wire_errors import check_status

TYPE_GROUP_DESCRIBE: Final = b"GD"
TYPE_GROUP_LIST: Final = b"GL"
TYPE_GROUP_LEASED: Final = b"GQ"
MAX_LEASED_ANSWER: Final = 1000


@dataclass(frozen=True, slots=True)
class LeasedRecord:
    """A record leased to the asking member: the record (None: gone), its delivery count
    (1 on the first delivery) and the lease's deadline on the log clock."""

    topic: str
    id: RecordId
    deliveries: int
    deadline_ms: int
    item: LoggedRecord | None


@dataclass(frozen=True, slots=True)
class LeasedRequest:
    """``GQ``: the records leased to ``member`` of ``group``, in id order after ``after``."""

    group: str
    member: str
    min_applied: int = 0
    limit: int = MAX_LEASED_ANSWER
    after: tuple[str, RecordId] | None = None
    topic: str | None = None
    """Only the leases of this topic (None: of every topic the group reads)."""


@dataclass(frozen=True, slots=True)
class LeasedPage:
    """A ``GQ`` answer: the peer's applied index, the leased records of this answer, and
    whether more leases follow the last one (a byte-bounded answer)."""

    applied: int
    records: list[LeasedRecord]
    more: bool


def _arg(args: Sequence[bytes], what: str) -> Any:
    if len(args) != 1:
        raise rpc.bad_request(f"{what} takes one argument frame")
    try:
        return decode_json(args[0], 3)
    except RemoteProtocolError as exc:
        raise rpc.bad_request(str(exc)) from None


def decode_name_request(args: Sequence[bytes]) -> str:
    """``GD``'s group name."""
    if len(args) != 1:
        raise rpc.bad_request("GD takes one argument frame: the group name")
    try:
        return check_group_name(args[0].decode())
    except UnicodeDecodeError:
        raise rpc.bad_request("the group name must be UTF-8") from None


def encode_info(info: GroupInfo) -> list[bytes]:
    """``GD``'s answer frames."""
    s = info.stats
    body = {
        "name": info.name,
        "mode": info.mode,
        "topics": list(info.topics),
        "pattern": info.pattern,
        "created_index": info.created_index,
        "options": options_map(info.options),
        "positions": {
            t: [p.next_record.index, p.next_record.position, p.metadata, p.committed_at_ms,
                p.member]
            for t, p in info.positions.items()
        },
        "queue": {
            t: [q.cursor.index, q.cursor.position, q.pending, q.redeliver]
            for t, q in info.queue.items()
        },
        "members": dict(info.members),
        "stats": [s.delivered, s.acked, s.redelivered, s.dead_lettered],
        "applied": info.applied,
        "owners": {t: [m, until] for t, (m, until) in info.owners.items()},
    }
    return [TRUE_FRAME, pack_json(body)]


def decode_info(frames: Sequence[bytes]) -> GroupInfo:
    """``GD``'s answer (an error answer raises its ``TopicError``)."""
    check_status(frames, 1)
    body = decode_json(frames[1], 1)
    try:
        assert isinstance(body, dict)
        positions = {
            t: GroupPosition(RecordId(int(i), int(p)), str(meta), int(at), member)
            for t, (i, p, meta, at, member) in body["positions"].items()
        }
        queue = {
            t: QueueTopicStats(RecordId(int(i), int(p)), int(n), int(w))
            for t, (i, p, n, w) in body["queue"].items()
        }
        return GroupInfo(
            str(body["name"]), body["mode"], tuple(body["topics"]), body["pattern"],
            int(body["created_index"]), check_options(dict(body["options"])), positions, queue,
            {str(k): int(v) for k, v in body["members"].items()},
            GroupStats(*(int(n) for n in body["stats"])), int(body["applied"]),
            {str(t): (str(m), int(u)) for t, (m, u) in body.get("owners", {}).items()},
        )
    except (AssertionError, KeyError, TypeError, ValueError, TopicError) as exc:
        raise RemoteProtocolError(f"bad group info: {exc}", 1) from None


def encode_list_request(patterns: Sequence[str] | None = None) -> list[bytes]:
    """``GL``'s arguments: none (every group), or one JSON frame of group names and
    ``prefix*`` patterns: the listing then holds only the groups matching one of them, so a
    key never learns the names of groups it may not consume from (the guard puts them)."""
    return rpc.encode_list_request(patterns)


def decode_list_request(args: Sequence[bytes]) -> tuple[str, ...] | None:
    """The patterns of a ``GL`` request (None: every group); ``BadRequest`` when malformed."""
    try:
        return rpc.decode_list_request(args)
    except TopicError:
        raise rpc.bad_request(
            "GL takes no frame or one: a JSON array of group names and 'prefix*' patterns"
        ) from None


def encode_list_response(names: Sequence[str]) -> list[bytes]:
    return [TRUE_FRAME, pack_json(sorted(names))]


def decode_list_response(frames: Sequence[bytes]) -> tuple[str, ...]:
    check_status(frames, 1)
    names = decode_json(frames[1], 1)
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise RemoteProtocolError("a group list is a list of names", 1)
    return tuple(names)


def encode_leased_request(req: LeasedRequest) -> list[bytes]:
    body: dict[str, Any] = {"group": req.group, "member": req.member,
                            "min_applied": req.min_applied, "limit": req.limit}
    if req.after is not None:
        topic, rid = req.after
        body["after"] = [topic, rid.index, rid.position]
    if req.topic is not None:
        body["topic"] = req.topic
    return [pack_json(body)]


def decode_leased_request(args: Sequence[bytes]) -> LeasedRequest:
    body = _arg(args, "GQ")
    if not isinstance(body, dict):
        raise rpc.bad_request("GQ's argument is a map")
    min_applied, limit = body.get("min_applied", 0), body.get("limit", MAX_LEASED_ANSWER)
    if type(min_applied) is not int or min_applied < 0:
        raise rpc.bad_request("min_applied must be an unsigned integer")
    if type(limit) is not int or not 1 <= limit <= MAX_LEASED_ANSWER:
        raise rpc.bad_request(f"limit must be in 1 .. {MAX_LEASED_ANSWER}")
    return LeasedRequest(
        check_group_name(body.get("group")), check_member(body.get("member")), min_applied, limit,
        _after(body.get("after")), _topic(body.get("topic")),
    )


def _topic(value: object) -> str | None:
    if value is not None and not isinstance(value, str):
        raise rpc.bad_request("topic must be a topic name")
    return value


def _after(value: object) -> tuple[str, RecordId] | None:
    if value is None:
        return None
    if not (isinstance(value, list) and len(value) == 3 and isinstance(value[0], str)
            and type(value[1]) is int and 0 <= value[1] <= MAX_UINT
            and type(value[2]) is int and 0 <= value[2] <= MAX_POSITION):
        raise rpc.bad_request("after must be [topic, index, position]")
    return value[0], RecordId(value[1], value[2])


def encode_leased_response(
    applied: int, leased: Sequence[LeasedRecord], more: bool = False
) -> list[bytes]:
    """A ``GQ`` answer (``more``: further leases follow the last one)."""
    leases = [[x.topic, x.id.index, x.id.position, x.deliveries, x.deadline_ms] for x in leased]
    records = [b"" if x.item is None else rpc.encode_record(x.item) for x in leased]
    return [TRUE_FRAME, pack_json({"applied": applied, "leases": leases, "more": more}),
            *records]


def decode_leased_response(frames: Sequence[bytes]) -> LeasedPage:
    """The :class:`LeasedPage` of a ``GQ`` answer."""
    check_status(frames, 1)
    meta = decode_json(frames[1], 1)
    if not isinstance(meta, dict) or not isinstance(meta.get("leases"), list):
        raise RemoteProtocolError("GQ meta must be {applied, leases}", 1)
    leases = meta["leases"]
    if len(frames) != 2 + len(leases):
        raise RemoteProtocolError("GQ has one record frame per lease", 1)
    out = []
    for n, (lease, frame) in enumerate(zip(leases, frames[2:], strict=True), start=2):
        if not isinstance(lease, list) or len(lease) != 5:
            raise RemoteProtocolError("a lease is [topic, index, position, deliveries, due]", 1)
        topic, index, position, deliveries, deadline = lease
        item = rpc._decode_record(frame, n) if frame else None
        out.append(LeasedRecord(
            str(topic), RecordId(json_to_uint(index, 1, "index"),
                                 json_to_uint(position, 1, "position")),
            json_to_uint(deliveries, 1, "deliveries"), json_to_uint(deadline, 1, "deadline"),
            item,
        ))
    more = meta.get("more", False)
    if type(more) is not bool:
        raise RemoteProtocolError("GQ's more must be true or false", 1)
    return LeasedPage(json_to_uint(meta.get("applied"), 1, "applied"), out, more)
