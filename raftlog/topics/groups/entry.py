"""Group commands: topic entry kind 06 (issue #27), replicated like any topic entry.

Same 15-byte header as every topic entry (``raftlog.topics.records``), so a reference peer
replicates it as opaque STATE data. Body (MessagePack): ``[op: str, group: str, args: map]``.

====================  ==========================================================================
op                    args
====================  ==========================================================================
``create``            ``mode`` ("stream" / "queue"), ``topics`` [str], ``pattern`` str | nil,
                      ``options`` map (queue: ``ack_wait_ms``, ``max_deliveries``,
                      ``max_in_flight``, ``dead_letter``), ``exist_ok`` bool
``delete``            --
``commit``            ``topic``, ``next`` [index, position], ``metadata`` str, ``member`` str|nil
``reset``             ``topic`` str | nil (every topic), ``to`` "earliest" / "latest" /
                      [index, position]
``lease``             ``member``, ``max`` uint: lease up to ``max`` records to ``member``
``ack`` / ``nack``    ``member``, ``ids`` [[topic, index, position], ...] (nack: ``reason`` str)
``dead``              ``ids`` [[topic, index, position], ...]: the leader published these dead
                      records to the dead-letter topic (``raftlog.topics.groups.deadletter``)
====================  ==========================================================================

The rules (what each op does, deterministically, at apply): ``raftlog.topics.groups.table``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final, Literal, TypeAlias

import msgpack

from raftlog.errors import TopicError
from raftlog.topics.groups.model import (
    GROUP_MODES,
    MAX_LEASE_BATCH,
    MAX_METADATA,
    check_group_name,
    check_member,
    check_options,
    check_topics,
)
from raftlog.topics.records import (
    MAX_UINT,
    TOPIC_NAME_RE,
    RecordFormatError,
    RecordId,
    _header,
)

KIND_GROUP: Final = 6
GroupOp: TypeAlias = Literal["create", "delete", "commit", "reset", "lease", "ack", "nack", "dead"]
GROUP_OPS: Final = ("create", "delete", "commit", "reset", "lease", "ack", "nack", "dead")
MAX_IDS: Final = 10_000
"""Most record ids one ack, nack or dead command carries."""
MAX_REASON: Final = 1024
TopicRecord: TypeAlias = tuple[str, RecordId]
"""A record of a group's topic: ``(topic, id)``."""


@dataclass(frozen=True, slots=True)
class GroupCommand:
    """One group command (the module docstring lists the ops and their args)."""

    op: GroupOp
    group: str
    args: dict[str, Any] = field(default_factory=dict)
    append_time_ms: int = 0


def encode_group_command(command: GroupCommand) -> bytes:
    """The entry data of ``command`` (validated as the decoder will; the leader stamps it)."""
    checked = check_command(command.op, command.group, command.args)
    packed: bytes = msgpack.packb([checked.op, checked.group, checked.args], use_bin_type=True)
    return _header(KIND_GROUP, 0, command.append_time_ms) + packed


def decode_group_body(flags: int, append_time: int, body: object) -> GroupCommand:
    """A group command from its unpacked MessagePack body (``RecordFormatError`` if bad)."""
    if flags:
        raise RecordFormatError("group commands take no flags")
    if not isinstance(body, list) or len(body) != 3 or not isinstance(body[2], dict):
        raise RecordFormatError("a group command body is [op, group, args]")
    try:
        command = check_command(body[0], body[1], body[2])
    except RecordFormatError:
        raise
    except TopicError as exc:
        raise RecordFormatError(exc.message, exc.name) from None
    return GroupCommand(command.op, command.group, command.args, append_time)


def _ids(raw: object) -> list[list[Any]]:
    if not isinstance(raw, list) or not 0 < len(raw) <= MAX_IDS:
        raise RecordFormatError(f"ids must be a list of 1 .. {MAX_IDS} [topic, index, position]")
    for item in raw:
        if (
            not isinstance(item, list | tuple)
            or len(item) != 3
            or not isinstance(item[0], str)
            or not TOPIC_NAME_RE.fullmatch(item[0])
        ):
            raise RecordFormatError("each id is [topic, index, position]")
        _uint(item[1], "index")
        _uint(item[2], "position")
    return [list(item) for item in raw]


def _uint(value: object, what: str) -> int:
    if type(value) is not int or not 0 <= value <= MAX_UINT:
        raise RecordFormatError(f"{what} must be an unsigned integer, got {value!r}")
    return value


def _record_id(raw: object) -> list[int]:
    if not isinstance(raw, list | tuple) or len(raw) != 2:
        raise RecordFormatError("a record id is [index, position]")
    return [_uint(raw[0], "index"), _uint(raw[1], "position")]


def _text(raw: object, what: str, limit: int) -> str:
    if not isinstance(raw, str) or len(raw.encode()) > limit:
        raise RecordFormatError(f"{what} must be a string of at most {limit} bytes")
    return raw


def check_command(op: object, group: object, args: dict[Any, Any]) -> GroupCommand:
    """``op``/``group``/``args`` validated, with args normalised (``TopicError`` if bad)."""
    if op not in GROUP_OPS:
        raise RecordFormatError(f"unknown group operation {op!r}")
    name = check_group_name(group)
    out: dict[str, Any] = {}
    if op == "create":
        if args.get("mode") not in GROUP_MODES:
            raise RecordFormatError("mode must be 'stream' or 'queue'", "InvalidGroup")
        topics, pattern = check_topics(args.get("topics", []), args.get("pattern"))
        options = args.get("options", {})
        if not isinstance(options, dict):
            raise RecordFormatError("options must be a map", "InvalidGroup")
        check_options(options)
        out = {"mode": args["mode"], "topics": list(topics), "pattern": pattern,
               "options": options, "exist_ok": bool(args.get("exist_ok", False))}
    elif op == "commit":
        topic = args.get("topic")
        if not isinstance(topic, str) or not TOPIC_NAME_RE.fullmatch(topic):
            raise RecordFormatError(f"invalid topic name {repr(topic)[:80]}", "InvalidTopicName")
        member = args.get("member")
        out = {"topic": topic, "next": _record_id(args.get("next")),
               "metadata": _text(args.get("metadata", ""), "metadata", MAX_METADATA),
               "member": None if member is None else check_member(member)}
    elif op == "reset":
        topic, to = args.get("topic"), args.get("to")
        if topic is not None and (not isinstance(topic, str) or not TOPIC_NAME_RE.fullmatch(topic)):
            raise RecordFormatError(f"invalid topic name {repr(topic)[:80]}", "InvalidTopicName")
        if to not in ("earliest", "latest"):
            to = _record_id(to)
        out = {"topic": topic, "to": to}
    elif op == "lease":
        count = _uint(args.get("max"), "max")
        if not 1 <= count <= MAX_LEASE_BATCH:
            raise RecordFormatError(f"max must be in 1 .. {MAX_LEASE_BATCH}")
        out = {"member": check_member(args.get("member")), "max": count}
    elif op in ("ack", "nack"):
        out = {"member": check_member(args.get("member")), "ids": _ids(args.get("ids"))}
        if op == "nack":
            out["reason"] = _text(args.get("reason", ""), "reason", MAX_REASON)
    elif op == "dead":
        out = {"ids": _ids(args.get("ids"))}
    return GroupCommand(op, name, out)


def topic_record(item: list[Any]) -> TopicRecord:
    """``[topic, index, position]`` (checked by the decoder) as ``(topic, RecordId)``."""
    return item[0], RecordId(item[1], item[2])
