"""Topic records inside STATE entries: the versioned format of issue #7 (pure functions).

A topic entry is an ordinary STATE entry (docs/protocol.md §4.1) whose data starts with a magic
prefix, so the wire protocol is untouched: a reference client or peer sees opaque STATE
data. Layout of the entry *data*::

    offset 0   4 bytes  magic  c1 52 4c 54  ("\\xc1RLT")
    offset 4   1 byte   version: 01
    offset 5   1 byte   kind: 01 record batch, 02 topic admin command, 03 clock tick, 04/05
                        transaction control / store (``raftlog.topics.records_tx``), 08
                        conditional record batch (``raftlog.topics.records_kv``)
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
  ``value`` nil is a tombstone (a key's deletion, ``Record.tombstone``; needs a key).
* admin command (kind 02): ``[op: str, topic: str, properties: map]``, ``op`` one of
  ``create`` / ``update`` (only the keys it carries) / ``delete`` (empty map); properties
  ``retention_ms``, ``max_bytes`` (size retention), ``max_record_bytes`` (largest record),
  each a uint >= 1 or nil (no limit). Meanings: docs/topics.md.
* clock tick (kind 03): body nil; the leader's only (``raftlog.topics.clock``), so
  retention, which runs on the append times in the log, advances on an idle cluster.

A record's id is ``(log index, position in the entry)``: ``RecordId`` sorts in log order,
which is the order every consumer sees on every peer. Decoding: ``raftlog.topics.record_decode``.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from operator import itemgetter
from typing import Any, Final, TypeAlias, TypeVar

import msgpack

from raftlog.errors import RecordFormatError, TopicError
from raftlog.topics.properties import (
    CLEANUP_POLICIES,
    MAX_PROPERTY_TEXT,
    PROPERTY_CHOICES,
    PROPERTY_KINDS,
    PROPERTY_NAMES,
    AdminOp,
    PropertyValue,
    TopicProperties,
    check_properties,
    check_property,
)

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
ADMIN_OPS: Final = ("create", "update", "delete")

__all__ = [  # re-exported: they live in raftlog.errors and raftlog.topics.properties
    "CLEANUP_POLICIES",
    "MAX_PROPERTY_TEXT",
    "AdminOp",
    "PROPERTY_CHOICES",
    "PROPERTY_KINDS",
    "PROPERTY_NAMES",
    "PropertyValue",
    "RecordFormatError",
    "TopicError",
    "TopicProperties",
    "check_properties",
    "check_property",
]


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
    tombstone: bool = False
    """A deletion of ``key`` (nil value on the wire; ``value`` is then b""): a compacted
    topic keeps it ``tombstone_retention_ms``, then forgets the key."""

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


Read = TypeVar("Read", bound="LoggedRecord | None")


def records_within(
    items: Iterable[Read], budget: int, limit: int | None = None
) -> tuple[list[Read], bool]:
    """The first of ``items`` whose record bytes (``Record.size``) add up to at most
    ``budget`` -- the first one always, however large, so a reader always progresses; a
    record gone (None) weighs nothing -- and at most ``limit`` of them, read no further;
    and whether any was left. The one rule of every byte-bounded answer: a ``TR`` read, a
    ``TF`` credit, a ``GQ`` answer, a dead-letter publish."""
    out: list[Read] = []
    size = 0
    for item in items:
        weight = 0 if item is None else item.record.size
        if (limit is not None and len(out) >= limit) or (out and size + weight > budget):
            return out, True
        out.append(item)
        size += weight
    return out, False


@dataclass(slots=True)
class SkipBudget:
    """How many records a read may pass over without answering them (superseded copies of a
    compacted topic, records whose TTL ran out) before it stops where it is.

    Why: those stay until log compaction passes them (never, with compaction off), and a
    read walked all of them in one loop pass -- 0.6-0.7 s per 200,000, for any reader.
    ``stopped_at`` is the first record not looked at: a read continues from it
    (``raftlog.server.continued_reads``), and nothing before it can become readable."""

    left: int
    stopped_at: RecordId | None = None

    def __post_init__(self) -> None:
        if self.left < 1:  # a read that could pass over nothing would never move on
            raise ValueError("a read must be able to pass over one record at least")

    def skip(self, rid: RecordId) -> bool:
        """Pass over ``rid``; False (and ``stopped_at`` set) when the budget is spent."""
        if self.left <= 0:
            self.stopped_at = rid
            return False
        self.left -= 1
        return True


@dataclass(frozen=True, slots=True)
class Expectation:
    """One condition of a conditional publish (``raftlog.topics.records_kv``)."""

    topic: str
    last: RecordId | None
    """The expected last record id; None: none (an empty topic, or an absent key)."""
    key: bytes | None = None
    """None: the topic's last record; else this key's latest record (compacted topics)."""

    def describe(self) -> str:
        """For error messages: what was expected, in words."""
        what = (
            f"topic {self.topic!r}" if self.key is None else f"key {self.key!r} of {self.topic!r}"
        )
        return f"{what} at {self.last}" if self.last is not None else f"{what} empty"


@dataclass(frozen=True, slots=True)
class RecordBatch:
    records: tuple[Record, ...]
    append_time_ms: int = 0
    flags: int = 0
    expect: tuple[Expectation, ...] = ()
    """Conditions checked at apply (kind 08, ``raftlog.topics.records_kv``): all must hold,
    or the whole batch is refused with ``ExpectationFailedError``."""

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



def check_uint(value: object, what: str, limit: int = MAX_UINT) -> int:
    if type(value) is not int or not 0 <= value <= limit:
        raise RecordFormatError(f"{what} must be an integer in 0 .. {limit}, got {value!r}")
    return value


def check_record(record: Record) -> None:
    """Field types and ranges of one record (what ``encode_records`` and decoders enforce)."""
    check_topic_name(record.topic)
    if not isinstance(record.value, bytes):
        raise RecordFormatError(f"record value must be bytes, got {type(record.value).__name__}")
    if record.tombstone and (record.key is None or record.value):
        raise RecordFormatError("a tombstone (nil value) needs a key and no value")
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
            and not record.tombstone
            and type(ts) is int
            and 0 <= ts <= MAX_UINT
        ):
            check_record(record)
            checked.add(record.topic)
    packed: bytes = msgpack.packb(records_body(records), use_bin_type=True)
    return _header(KIND_RECORDS, flags, append_time_ms) + packed


def records_body(records: Sequence[Record]) -> list[list[Any]]:
    """The MessagePack body of checked ``records`` (a tombstone's value is nil)."""
    return [
        [r.topic, r.key, None if r.tombstone else r.value, dict(r.headers), r.timestamp_ms]
        if r.ttl_ms is None
        else [
            r.topic, r.key, None if r.tombstone else r.value, dict(r.headers), r.timestamp_ms,
            r.ttl_ms,
        ]
        for r in records
    ]


def encode_command(command: TopicCommand) -> bytes:
    """The data of one STATE entry carrying a topic admin command."""
    if command.op not in ADMIN_OPS:
        raise RecordFormatError(f"unknown admin operation {command.op!r}")
    check_topic_name(command.topic)
    props = check_properties(command.properties, command.op)
    packed: bytes = msgpack.packb([command.op, command.topic, props], use_bin_type=True)
    return _header(KIND_ADMIN, 0, command.append_time_ms) + packed


def encode_clock_tick(append_time_ms: int) -> bytes:
    """The data of the leader's clock tick entry (stamped: the tick *is* its append time)."""
    return _header(KIND_CLOCK, 0, append_time_ms) + b"\xc0"


# --- recognising topic data (decoding: ``raftlog.topics.record_decode``) -------------------


def is_topic_data(data: bytes) -> bool:
    """Does this STATE data claim to be a topic entry (cheap: the magic only)?"""
    return data[:4] == MAGIC


_HEAD: Final = itemgetter(slice(0, len(MAGIC)))
"""The bytes of a data where a topic entry has its magic."""


def any_topic_data(datas: Iterable[bytes]) -> bool:
    """``any(map(is_topic_data, datas))`` without a Python frame per data: the leader asks
    it once per proposal batch (``TopicGate.needs_prepare``, issue #28)."""
    return MAGIC in map(_HEAD, datas)
