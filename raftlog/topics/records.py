"""Topic records inside STATE entries: the versioned format of issue #7 (pure functions).

A topic entry is an ordinary STATE entry (docs/protocol.md §4.1) whose data starts with a magic
prefix, so the wire protocol is untouched: a reference client or peer sees opaque STATE
data. Layout of the entry *data*::

    offset 0   4 bytes  magic  c1 52 4c 54  ("\\xc1RLT")
    offset 4   1 byte   version: 01
    offset 5   1 byte   kind: 01 record batch, 02 topic admin command, 03 clock tick, 04/05
                        transaction control / store (``raftlog.topics.records_tx``)
    offset 6   1 byte   flags: bit 0 AUTO_CREATE (set by the leader only); bits 1-7 zero
    offset 7   8 bytes  append time: ms since the Unix epoch, unsigned big-endian,
                        0 when not stamped (clients send 0; the leader stamps it)
    offset 15  ...      body: one MessagePack value (below)

``c1`` is never MessagePack and never UTF-8, so no MessagePack, JSON or text a reference
client writes looks like a topic entry; data without the magic is simply not one.

Bodies (MessagePack, strings as str, bytes as bin):

* record batch (kind 01): >= 1 records, each ``[topic: str, key: bin | nil, value: bin,
  headers: map str -> bin, timestamp: uint]`` plus an optional ``ttl_ms: uint >= 1`` (its
  own time to live from its append time; older peers refuse the 6-array as malformed).
  ``timestamp`` is the producer's, not interpreted. A batch is applied (or refused) whole.
* admin command (kind 02): ``[op: str, topic: str, properties: map]``, ``op`` one of
  ``create`` / ``update`` (only the keys it carries) / ``delete`` (empty map); properties
  ``retention_ms``, ``max_bytes`` (size retention), ``max_record_bytes`` (largest record),
  each a uint >= 1 or nil (no limit). Meanings: docs/topics.md.
* clock tick (kind 03): body nil; the leader's only (``raftlog.topics.clock``), so
  retention, which runs on the append times in the log, advances on an idle cluster.

A record's id is ``(log index, position in the entry)``: ``RecordId`` sorts in log order,
which is the order every consumer sees on every peer.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Any, Final, Literal, TypeAlias

import msgpack

from raftlog.errors import TopicError

MAGIC: Final = b"\xc1RLT"
VERSION: Final = 1
KIND_RECORDS: Final = 1
KIND_ADMIN: Final = 2
KIND_CLOCK: Final = 3
FLAG_AUTO_CREATE: Final = 0x01
_KNOWN_FLAGS: Final = FLAG_AUTO_CREATE
_HEADER: Final = struct.Struct(">4sBBBQ")
HEADER_SIZE: Final = _HEADER.size  # 15
TIME_OFFSET: Final = 7
FLAGS_OFFSET: Final = 6

MAX_UINT: Final = (1 << 53) - 1
"""Bound of every number in the format (times, properties): exact in any MessagePack reader,
JavaScript's included."""
MAX_POSITION: Final = (1 << 32) - 1
TOPIC_NAME_RE: Final = re.compile(r"[A-Za-z0-9._-]{1,249}")
PropertyValue: TypeAlias = int | str | None
"""A topic property's value: a limit (uint) or a text; None: unset."""
MAX_PROPERTY_TEXT: Final = 1024
"""Largest text property, in UTF-8 bytes (it is stored in every version row and snapshot)."""
_UINT: Final = {"kind": "uint"}
_TEXT: Final = {"kind": "text"}
AdminOp: TypeAlias = Literal["create", "update", "delete"]
ADMIN_OPS: Final = ("create", "update", "delete")

__all__ = ["TopicError"]  # re-exported: it lives in raftlog.errors


class RecordFormatError(TopicError, ValueError):
    """Bytes or values that do not form a valid topic entry (code ``BadRecord`` unless a more
    precise one applies: ``InvalidTopicName``, ``InvalidProperty``)."""

    def __init__(self, message: str, name: str = "BadRecord") -> None:
        super().__init__(name, message)


@dataclass(frozen=True, order=True, slots=True)
class RecordId:
    """Where a record lives: sorts in log order (index, then position in the entry)."""

    index: int
    position: int

    def __str__(self) -> str:
        return f"{self.index}:{self.position}"


@dataclass(frozen=True, slots=True)
class Record:
    topic: str
    value: bytes
    key: bytes | None = None
    headers: Mapping[str, bytes] = field(default_factory=dict)
    timestamp_ms: int = 0
    """The producer's timestamp; the log orders and expires by append time instead."""
    ttl_ms: int | None = None
    """This record's own time to live from its append time (None: the topic's retention);
    it can only shorten the topic's ``retention_ms``, never extend it."""

    @property
    def size(self) -> int:
        """What ``max_bytes`` and ``max_record_bytes`` count: key, value, header names
        (UTF-8) and values."""
        size = len(self.value) + (len(self.key) if self.key else 0)
        if self.headers:
            size += sum(len(k.encode()) + len(v) for k, v in self.headers.items())
        return size


@dataclass(frozen=True, slots=True)
class LoggedRecord:
    """A record as read back from the log: its id and its (effective) append time."""

    id: RecordId
    append_time_ms: int
    record: Record


@dataclass(frozen=True, slots=True)
class TopicProperties:
    """A topic's retention and limits; every limit is optional (None: none)."""

    retention_ms: int | None = field(default=None, metadata=_UINT)
    """Records expire this long after their append time (None: never)."""
    max_bytes: int | None = field(default=None, metadata=_UINT)
    """Size retention (Kafka's ``retention.bytes``): the newest records whose sizes add up
    to at most this are kept, the older ones expire (None: no size limit)."""
    max_record_bytes: int | None = field(default=None, metadata=_UINT)
    """Largest ``Record.size`` accepted (None: only the log's entry size limit)."""
    description: str | None = field(default=None, metadata=_TEXT)
    """What the topic is for, for people (at most ``MAX_PROPERTY_TEXT`` bytes of UTF-8); no
    rule reads it."""

    def updated(self, changes: Mapping[str, PropertyValue]) -> TopicProperties:
        """These properties with ``changes`` applied (a name absent from it keeps its value)."""
        known: dict[str, Any] = {n: v for n, v in changes.items() if n in PROPERTY_NAMES}
        return replace(self, **known)  # values were checked by ``check_properties``

    def as_dict(self) -> dict[str, PropertyValue]:
        """Every property by name (unset ones as None), in declaration order."""
        return {name: getattr(self, name) for name in PROPERTY_NAMES}


PROPERTY_KINDS: Final[Mapping[str, str]] = {
    f.name: f.metadata["kind"] for f in fields(TopicProperties)
}
"""Every topic property and its kind (``uint``: a limit in 1 .. 2^53-1; ``text``): what the
admin command codec, the wire, the REST API and the stored state all follow, so a new
property is one field above."""
PROPERTY_NAMES: Final = tuple(PROPERTY_KINDS)


@dataclass(frozen=True, slots=True)
class RecordBatch:
    records: tuple[Record, ...]
    append_time_ms: int = 0
    flags: int = 0

    @property
    def auto_create(self) -> bool:
        return bool(self.flags & FLAG_AUTO_CREATE)


@dataclass(frozen=True, slots=True)
class TopicCommand:
    op: AdminOp
    topic: str
    properties: Mapping[str, PropertyValue] = field(default_factory=dict)
    append_time_ms: int = 0


@dataclass(frozen=True, slots=True)
class ClockTick:
    """The leader's "time has passed" entry: moves the log clock that retention reads."""

    append_time_ms: int = 0


TopicEntry: TypeAlias = RecordBatch | TopicCommand | ClockTick


# --- validation ----------------------------------------------------------------------------


def check_topic_name(name: object) -> str:
    """A topic name: 1-249 of ``A-Z a-z 0-9 . _ -``, and not ``.`` or ``..`` (Kafka's rule,
    so names stay safe as file and key components)."""
    if not isinstance(name, str) or not TOPIC_NAME_RE.fullmatch(name) or name in (".", ".."):
        shown = repr(name)[:80]
        raise RecordFormatError(
            f"invalid topic name {shown}: use 1-249 characters of A-Z a-z 0-9 . _ -",
            "InvalidTopicName",
        )
    return name


def check_property(name: object, value: object) -> PropertyValue:
    """One property: a known name, and a value of its kind or None."""
    kind = PROPERTY_KINDS.get(name) if isinstance(name, str) else None
    if kind is None:
        raise RecordFormatError(
            f"unknown topic property {name!r} (known: {', '.join(PROPERTY_NAMES)})",
            "InvalidProperty",
        )
    if value is None:
        return None
    if kind == "text":
        if not isinstance(value, str) or len(value.encode()) > MAX_PROPERTY_TEXT:
            raise RecordFormatError(
                f"topic property {name} must be null or a text of at most "
                f"{MAX_PROPERTY_TEXT} bytes, got {value!r:.80}",
                "InvalidProperty",
            )
        return value
    if type(value) is not int or not 1 <= value <= MAX_UINT:
        raise RecordFormatError(
            f"topic property {name} must be null or an integer in 1 .. 2^53-1, got {value!r}",
            "InvalidProperty",
        )
    return value


def check_properties(props: object, op: AdminOp) -> dict[str, PropertyValue]:
    """Known property names only, each of its kind or None; ``delete`` takes none."""
    if not isinstance(props, Mapping):
        raise RecordFormatError("topic properties must be a map", "InvalidProperty")
    out = {name: check_property(name, value) for name, value in props.items()}
    if op == "delete" and out:
        raise RecordFormatError("delete takes no properties", "InvalidProperty")
    return out


def check_uint(value: object, what: str, limit: int = MAX_UINT) -> int:
    if type(value) is not int or not 0 <= value <= limit:
        raise RecordFormatError(f"{what} must be an integer in 0 .. {limit}, got {value!r}")
    return value


def check_record(record: Record) -> None:
    """Field types and ranges of one record (what ``encode_records`` and decoders enforce)."""
    check_topic_name(record.topic)
    if not isinstance(record.value, bytes):
        raise RecordFormatError(f"record value must be bytes, got {type(record.value).__name__}")
    if record.key is not None and not isinstance(record.key, bytes):
        raise RecordFormatError(f"record key must be bytes or None, got {type(record.key)}")
    if not isinstance(record.headers, Mapping):
        raise RecordFormatError("record headers must be a map of str to bytes")
    for name, value in record.headers.items():
        if not isinstance(name, str) or not isinstance(value, bytes):
            raise RecordFormatError(f"record header {name!r} must map str to bytes")
    check_uint(record.timestamp_ms, "record timestamp")
    if record.ttl_ms is not None and (
        type(record.ttl_ms) is not int or not 1 <= record.ttl_ms <= MAX_UINT
    ):
        raise RecordFormatError(f"record ttl_ms must be None or 1 .. 2^53-1, got {record.ttl_ms!r}")


# --- encoding ------------------------------------------------------------------------------


def _header(kind: int, flags: int, append_time_ms: int) -> bytes:
    if flags & ~_KNOWN_FLAGS:
        raise RecordFormatError(f"unknown flags {flags:#x}")
    check_uint(append_time_ms, "append time")
    return _HEADER.pack(MAGIC, VERSION, kind, flags, append_time_ms)


def encode_records(records: Sequence[Record], *, append_time_ms: int = 0, flags: int = 0) -> bytes:
    """The data of one STATE entry publishing ``records`` atomically (clients leave the time
    and flags at 0: the leader fills them in)."""
    if not records:
        raise RecordFormatError("a record batch needs at least one record")
    if len(records) > MAX_POSITION + 1:
        raise RecordFormatError("too many records in one batch")
    checked: set[str] = set()
    for record in records:  # plain records of an already checked topic skip check_record
        ts = record.timestamp_ms
        if not (
            type(record.topic) is str
            and record.topic in checked
            and type(record.value) is bytes
            and (record.key is None or type(record.key) is bytes)
            and not record.headers
            and record.ttl_ms is None
            and type(ts) is int
            and 0 <= ts <= MAX_UINT
        ):
            check_record(record)
            checked.add(record.topic)
    body = [
        [r.topic, r.key, r.value, dict(r.headers), r.timestamp_ms]
        if r.ttl_ms is None
        else [r.topic, r.key, r.value, dict(r.headers), r.timestamp_ms, r.ttl_ms]
        for r in records
    ]
    packed: bytes = msgpack.packb(body, use_bin_type=True)
    return _header(KIND_RECORDS, flags, append_time_ms) + packed


def encode_command(command: TopicCommand) -> bytes:
    """The data of one STATE entry carrying a topic admin command."""
    if command.op not in ADMIN_OPS:
        raise RecordFormatError(f"unknown admin operation {command.op!r}")
    check_topic_name(command.topic)
    props = check_properties(command.properties, command.op)
    packed: bytes = msgpack.packb([command.op, command.topic, props], use_bin_type=True)
    return _header(KIND_ADMIN, 0, command.append_time_ms) + packed


# --- decoding ------------------------------------------------------------------------------


def encode_clock_tick(append_time_ms: int) -> bytes:
    """The data of the leader's clock tick entry (stamped: the tick *is* its append time)."""
    return _header(KIND_CLOCK, 0, append_time_ms) + b"\xc0"


def is_topic_data(data: bytes) -> bool:
    """Does this STATE data claim to be a topic entry (cheap: the magic only)?"""
    return data[:4] == MAGIC


def decode_entry(data: bytes) -> TopicEntry | None:
    """The topic entry in STATE ``data``; None without the magic; ``RecordFormatError`` when
    the magic is there but the rest is not a valid entry of a known version."""
    if not is_topic_data(data):
        return None
    if len(data) <= HEADER_SIZE:
        raise RecordFormatError(f"topic entry of {len(data)} bytes is too short")
    _, version, kind, flags, append_time = _HEADER.unpack_from(data)
    if version != VERSION:
        raise RecordFormatError(f"unsupported topic entry version {version}")
    if flags & ~_KNOWN_FLAGS:
        raise RecordFormatError(f"unknown flags {flags:#x}")
    if append_time > MAX_UINT:
        raise RecordFormatError(f"append time {append_time} is out of range")
    body = _unpack(data[HEADER_SIZE:])
    if kind == KIND_RECORDS:
        return RecordBatch(_records(body), append_time, flags)
    if kind == KIND_ADMIN:
        if flags:
            raise RecordFormatError("admin commands take no flags")
        return _command(body, append_time)
    if kind == KIND_CLOCK:
        if flags or body is not None:
            raise RecordFormatError("a clock tick has no flags and a nil body")
        return ClockTick(append_time)
    raise RecordFormatError(f"unknown topic entry kind {kind}")


def _unpack(body: bytes) -> object:
    try:
        value: object = msgpack.unpackb(body, raw=False, strict_map_key=True, use_list=True)
    except (ValueError, TypeError, OverflowError, RecursionError, msgpack.UnpackException) as exc:
        raise RecordFormatError(f"invalid MessagePack body: {type(exc).__name__}: {exc}") from None
    return value


_set = object.__setattr__


def _new_record(
    topic: str,
    value: bytes,
    key: bytes | None,
    headers: dict[str, bytes],
    timestamp: int,
    *,
    ttl: int | None = None,
) -> Record:
    """``Record(...)`` without the frozen dataclass ``__init__`` (a third of the decode time);
    validated in ``_records``."""
    record: Record = object.__new__(Record)
    _set(record, "topic", topic)
    _set(record, "value", value)
    _set(record, "key", key)
    _set(record, "headers", headers)
    _set(record, "timestamp_ms", timestamp)
    _set(record, "ttl_ms", ttl)
    return record


def _records(body: object) -> tuple[Record, ...]:
    if not isinstance(body, list) or not body:
        raise RecordFormatError("a record batch body must be a non-empty array")
    if len(body) > MAX_POSITION + 1:
        raise RecordFormatError("too many records in one batch")
    # The hot loop of every publish (leader and every peer): plain type checks inline, each
    # topic name once per batch; anything unusual goes through check_record for the error.
    out = []
    checked: set[str] = set()
    for position, item in enumerate(body):
        size = len(item) if type(item) is list else 0
        if size == 5:
            topic, key, value, headers, timestamp = item
            ttl = None
        elif size == 6:
            topic, key, value, headers, timestamp, ttl = item
        else:
            raise RecordFormatError(f"record {position} must be a 5- or 6-element array")
        if type(headers) is not dict:
            raise RecordFormatError(f"record {position}: headers must be a map")
        record = _new_record(topic, value, key, headers, timestamp, ttl=ttl)
        plain = ttl is None and (
            type(topic) is str
            and topic in checked
            and type(value) is bytes
            and (key is None or type(key) is bytes)
            and type(timestamp) is int
            and 0 <= timestamp <= MAX_UINT
        )
        if plain and headers:
            for name, header in headers.items():
                if type(name) is not str or type(header) is not bytes:
                    plain = False
                    break
        if not plain:
            try:
                check_record(record)
            except RecordFormatError as exc:
                raise RecordFormatError(f"record {position}: {exc.message}", exc.name) from None
            checked.add(topic)
        out.append(record)
    return tuple(out)


def _command(body: object, append_time: int) -> TopicCommand:
    if not isinstance(body, list) or len(body) != 3:
        raise RecordFormatError("an admin command body must be a 3-element array")
    op, topic, props = body
    if op not in ADMIN_OPS:
        raise RecordFormatError(f"unknown admin operation {op!r}")
    return TopicCommand(op, check_topic_name(topic), check_properties(props, op), append_time)
