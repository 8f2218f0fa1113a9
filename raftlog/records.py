"""Topic records inside STATE entries: the versioned format of issue #7 (pure functions).

A topic entry is an ordinary STATE entry (docs/protocol.md §4.1) whose data starts with a magic
prefix, so the wire protocol is untouched: a reference client or peer sees opaque STATE
data. Layout of the entry *data*::

    offset 0   4 bytes  magic  c1 52 4c 54  ("\\xc1RLT")
    offset 4   1 byte   version: 01
    offset 5   1 byte   kind: 01 record batch, 02 topic admin command
    offset 6   1 byte   flags: bit 0 AUTO_CREATE (set by the leader only); bits 1-7 zero
    offset 7   8 bytes  append time: ms since the Unix epoch, unsigned big-endian,
                        0 when not stamped (clients send 0; the leader stamps it)
    offset 15  ...      body: one MessagePack value (below)

Why ``c1``: it is the one byte MessagePack never uses and is not valid UTF-8, so data a
reference client writes as MessagePack, JSON or text can never be mistaken for a topic entry.
Data without the magic is "not a topic entry" (``decode_entry`` returns None), never an error.

Bodies (MessagePack, strings as str, bytes as bin):

* record batch (kind 01): an array of >= 1 records, each the 5-array
  ``[topic: str, key: bin | nil, value: bin, headers: map str -> bin, timestamp: uint]``;
  ``timestamp`` is the producer's (ms), not interpreted by the log. All records of one
  entry are published atomically: they are applied (or refused) together.
* admin command (kind 02): the 3-array ``[op: str, topic: str, properties: map]`` with
  ``op`` one of ``create`` / ``update`` / ``delete`` and properties ``retention_ms``
  (record TTL by append time) and ``max_bytes`` (largest record accepted: key + value +
  header names and values), each a uint >= 1 or nil (no limit). ``update`` changes only the
  keys it carries; ``delete`` carries an empty map.

A record's id is ``(log index, position in the entry)``: ``RecordId`` sorts in log order,
which is the order every consumer sees on every peer.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final, Literal, TypeAlias

import msgpack

from raftlog.errors import RaftlogError

MAGIC: Final = b"\xc1RLT"
VERSION: Final = 1
KIND_RECORDS: Final = 1
KIND_ADMIN: Final = 2
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
PROPERTY_NAMES: Final = ("retention_ms", "max_bytes")
AdminOp: TypeAlias = Literal["create", "update", "delete"]
ADMIN_OPS: Final = ("create", "update", "delete")


class TopicError(RaftlogError):
    """A publish, admin command or topic RPC was refused; ``name`` is the stable error code
    sent on the wire (``UnknownTopic``, ``TopicExists``, ``RecordTooLarge``, ...)."""

    def __init__(self, name: str, message: str) -> None:
        self.name = name
        self.message = message
        super().__init__(f"{name}: {message}")


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

    @property
    def size(self) -> int:
        """What ``max_bytes`` limits: key, value, header names (UTF-8) and values."""
        headers = sum(len(k.encode()) + len(v) for k, v in self.headers.items())
        return len(self.key or b"") + len(self.value) + headers


@dataclass(frozen=True, slots=True)
class LoggedRecord:
    """A record as read back from the log: its id and its (effective) append time."""

    id: RecordId
    append_time_ms: int
    record: Record


@dataclass(frozen=True, slots=True)
class TopicProperties:
    retention_ms: int | None = None
    """Records expire this long after their append time (None: never)."""
    max_bytes: int | None = None
    """Largest ``Record.size`` accepted (None: only the log's entry size limit)."""

    def updated(self, changes: Mapping[str, int | None]) -> TopicProperties:
        return TopicProperties(
            changes.get("retention_ms", self.retention_ms),
            changes.get("max_bytes", self.max_bytes),
        )

    def as_dict(self) -> dict[str, int | None]:
        return {"retention_ms": self.retention_ms, "max_bytes": self.max_bytes}


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
    properties: Mapping[str, int | None] = field(default_factory=dict)
    append_time_ms: int = 0


TopicEntry: TypeAlias = RecordBatch | TopicCommand


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


def check_properties(props: object, op: AdminOp) -> dict[str, int | None]:
    """Known property names only, each a uint in 1 .. 2^53-1 or None; ``delete`` takes none."""
    if not isinstance(props, Mapping):
        raise RecordFormatError("topic properties must be a map", "InvalidProperty")
    out: dict[str, int | None] = {}
    for name, value in props.items():
        if name not in PROPERTY_NAMES:
            raise RecordFormatError(
                f"unknown topic property {name!r} (known: {', '.join(PROPERTY_NAMES)})",
                "InvalidProperty",
            )
        if value is not None and (type(value) is not int or not 1 <= value <= MAX_UINT):
            raise RecordFormatError(
                f"topic property {name} must be null or an integer in 1 .. 2^53-1, got {value!r}",
                "InvalidProperty",
            )
        out[name] = value
    if op == "delete" and out:
        raise RecordFormatError("delete takes no properties", "InvalidProperty")
    return out


def _check_uint(value: object, what: str, limit: int = MAX_UINT) -> int:
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
    _check_uint(record.timestamp_ms, "record timestamp")


# --- encoding ------------------------------------------------------------------------------


def _header(kind: int, flags: int, append_time_ms: int) -> bytes:
    if flags & ~_KNOWN_FLAGS:
        raise RecordFormatError(f"unknown flags {flags:#x}")
    _check_uint(append_time_ms, "append time")
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
            and type(ts) is int
            and 0 <= ts <= MAX_UINT
        ):
            check_record(record)
            checked.add(record.topic)
    body = [[r.topic, r.key, r.value, dict(r.headers), r.timestamp_ms] for r in records]
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
    raise RecordFormatError(f"unknown topic entry kind {kind}")


def _unpack(body: bytes) -> object:
    try:
        value: object = msgpack.unpackb(body, raw=False, strict_map_key=True, use_list=True)
    except (ValueError, TypeError, OverflowError, RecursionError, msgpack.UnpackException) as exc:
        raise RecordFormatError(f"invalid MessagePack body: {type(exc).__name__}: {exc}") from None
    return value


_set = object.__setattr__


def _new_record(
    topic: str, value: bytes, key: bytes | None, headers: dict[str, bytes], timestamp: int
) -> Record:
    """``Record(...)`` without the frozen dataclass ``__init__`` (a third of a batch's decode
    time): the same object, fields set directly. Validation happens in ``_records``."""
    record: Record = object.__new__(Record)
    _set(record, "topic", topic)
    _set(record, "value", value)
    _set(record, "key", key)
    _set(record, "headers", headers)
    _set(record, "timestamp_ms", timestamp)
    return record


def _records(body: object) -> tuple[Record, ...]:
    if not isinstance(body, list) or not body:
        raise RecordFormatError("a record batch body must be a non-empty array")
    if len(body) > MAX_POSITION + 1:
        raise RecordFormatError("too many records in one batch")
    # The hot loop of every publish (decoded by the leader, then by every peer's state
    # machine): plain type checks inline, each topic name checked once per batch; anything
    # unusual goes through check_record for the precise error.
    out = []
    checked: set[str] = set()
    for position, item in enumerate(body):
        if type(item) is not list or len(item) != 5:
            raise RecordFormatError(f"record {position} must be a 5-element array")
        topic, key, value, headers, timestamp = item
        if type(headers) is not dict:
            raise RecordFormatError(f"record {position}: headers must be a map")
        record = _new_record(topic, value, key, headers, timestamp)
        plain = (
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


# --- the leader's stamp --------------------------------------------------------------------


def stamp_append_time(data: bytes, now_ms: int, *, auto_create: bool = False) -> bytes:
    """``data`` with the append time set to ``now_ms`` and the flags set by the leader
    (AUTO_CREATE on record batches when ``auto_create``; whatever a client sent is replaced,
    so only the leader's configuration decides). The body is not re-encoded."""
    if not is_topic_data(data) or len(data) <= HEADER_SIZE:
        raise RecordFormatError("not a topic entry")
    _check_uint(now_ms, "append time")
    flags = FLAG_AUTO_CREATE if auto_create and data[5] == KIND_RECORDS else 0
    return b"".join(
        (data[:FLAGS_OFFSET], bytes((flags,)), now_ms.to_bytes(8, "big"), data[HEADER_SIZE:])
    )


def append_time_of(data: bytes) -> int:
    """The append time field of topic entry ``data`` (0 if it is not one)."""
    if not is_topic_data(data) or len(data) < HEADER_SIZE:
        return 0
    return int.from_bytes(data[TIME_OFFSET:HEADER_SIZE], "big")


class AppendClock:
    """The leader's stamp source: never earlier than the last stamp it gave, so the append
    times of one leader's entries are non-decreasing in log order even if the wall clock
    steps back. (Across leaders the state machine keeps times monotonic: see
    ``raftlog.statemachine.topics``.)"""

    def __init__(self, last_ms: int = 0) -> None:
        self.last_ms = last_ms

    def stamp(self, data: bytes, now_ms: int, *, auto_create: bool = False) -> bytes:
        self.last_ms = max(self.last_ms, now_ms)
        return stamp_append_time(data, self.last_ms, auto_create=auto_create)
