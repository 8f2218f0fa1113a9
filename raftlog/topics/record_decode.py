"""Decoding topic entries: ``decode_entry`` turns the STATE data of the format in
``raftlog.topics.records`` back into a ``RecordBatch``, ``TopicCommand`` or ``ClockTick``.

Why apart: ``records.py`` holds the format itself (layout, types, validation, encoding);
this module holds the reading side, whose record loop (``_records``) is the hot loop of
every publish and is tuned for it (plain type checks inline, ``Record`` built without the
frozen dataclass ``__init__``). The other entry kinds decode their bodies with the same
``_records`` and ``_unpack`` (``raftlog.topics.records_tx``, ``raftlog.topics.records_kv``).
"""

from __future__ import annotations

import msgpack

from raftlog.errors import RecordFormatError
from raftlog.topics.properties import check_properties
from raftlog.topics.records import (
    _HEADER,
    _KNOWN_FLAGS,
    ADMIN_OPS,
    HEADER_SIZE,
    KIND_ADMIN,
    KIND_CLOCK,
    KIND_RECORDS,
    MAX_POSITION,
    MAX_UINT,
    VERSION,
    ClockTick,
    Record,
    RecordBatch,
    TopicCommand,
    TopicEntry,
    check_record,
    check_topic_name,
    is_topic_data,
)


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
    tombstone: bool = False,
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
    _set(record, "tombstone", tombstone)
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
        tombstone = value is None
        if tombstone:
            value = b""
        record = _new_record(topic, value, key, headers, timestamp, ttl=ttl, tombstone=tombstone)
        plain = ttl is None and not tombstone and (
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
