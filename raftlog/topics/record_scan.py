"""A record batch summarised without a ``Record`` per record: the publish hot path.

Why: every publish is decoded by the leader's topic gate before it is proposed and by every
peer's topic state machine when it is applied. Both only need, per topic, which positions
the batch holds, how many bytes they add and the largest record (for ``max_record_bytes``),
plus the records' TTLs. Building a frozen ``Record`` for each record to get there cost
about three quarters of a microsecond per record, three or four times per publish
(measured with py-spy on a 3-peer cluster: decoding was the leader's largest CPU item).

:func:`summarize_batch` accepts exactly what ``raftlog.topics.record_decode.decode_entry``
accepts as a record batch, and nothing it would refuse; where it is unsure (anything it does not
recognise as a plain, valid batch) it returns None and the caller takes the full decoder,
which then produces the precise error. So the fast path can never change a decision, only
skip work.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final, Protocol

import msgpack

from raftlog.topics.records import (
    _HEADER,
    FLAG_AUTO_CREATE,
    HEADER_SIZE,
    KIND_RECORDS,
    MAGIC,
    MAX_POSITION,
    MAX_UINT,
    TOPIC_NAME_RE,
    VERSION,
    TopicProperties,
)
from raftlog.topics.records_kv import KIND_CONDITIONAL
from raftlog.topics.records_tx import KIND_TX_STORE

_MAX_BATCH: Final = MAX_POSITION + 1
_PLAIN_FLAGS: Final = FLAG_AUTO_CREATE


@dataclass(frozen=True, slots=True)
class TopicShare:
    """What one topic gets from a batch."""

    positions: list[int]
    """Positions (in the entry) of its records, ascending."""
    size: int
    """Bytes its records count towards ``max_bytes``: keys, values, header names and values."""
    largest: int
    """The largest of its records (checked against ``max_record_bytes``)."""


@dataclass(frozen=True, slots=True)
class BatchSummary:
    """A valid record batch as applying and checking it need it (see the module docstring)."""

    topics: dict[str, TopicShare]
    """Per topic, in order of first appearance in the batch."""
    ttls: list[int]
    """The ``ttl_ms`` of every record that has one."""
    append_time_ms: int
    flags: int

    @property
    def auto_create(self) -> bool:
        """Did the leader allow missing topics to be created (its AUTO_CREATE flag)?"""
        return bool(self.flags & FLAG_AUTO_CREATE)


def summarize_batch(data: bytes) -> BatchSummary | None:
    """The summary of the record batch in STATE ``data``, or None when ``data`` is not a
    valid record batch of the plain kind this fast path handles (not a topic entry, another
    kind, or anything the full decoder must look at, e.g. to name an error)."""
    if data[:4] != MAGIC or len(data) <= HEADER_SIZE:
        return None
    _, version, kind, flags, append_time = _HEADER.unpack_from(data)
    # Only the flags this fast path understands: a flag added later (with meaning for how a
    # batch applies) must go through the full decoder, not be summarised as a plain batch.
    if version != VERSION or kind != KIND_RECORDS or flags & ~_PLAIN_FLAGS:
        return None
    if append_time > MAX_UINT:
        return None
    try:
        body = msgpack.unpackb(data[HEADER_SIZE:], raw=False, strict_map_key=True, use_list=True)
    except Exception:  # the full decoder reports it precisely
        return None
    if type(body) is not list or not body or len(body) > _MAX_BATCH:
        return None
    return _summarize(body, append_time, flags)


def _summarize(body: list[object], append_time: int, flags: int) -> BatchSummary | None:
    # One pass, plain type checks inline (the same ones decode_entry's _records and
    # check_record make); a topic name is matched once per batch.
    positions: dict[str, list[int]] = {}
    sizes: dict[str, int] = {}
    largest: dict[str, int] = {}
    ttls: list[int] = []
    full_match = TOPIC_NAME_RE.fullmatch
    current: str | None = None
    mine: list[int] = []
    total = top = 0
    for position, item in enumerate(body):
        if type(item) is not list:
            return None
        if len(item) == 5:
            topic, key, value, headers, timestamp = item
        elif len(item) == 6:
            topic, key, value, headers, timestamp, ttl = item
            if type(ttl) is not int or not 1 <= ttl <= MAX_UINT:
                return None
            ttls.append(ttl)
        else:
            return None
        if (
            type(value) is not bytes
            or type(headers) is not dict
            or type(timestamp) is not int
            or not 0 <= timestamp <= MAX_UINT
        ):
            return None
        size = len(value)
        if key is not None:
            if type(key) is not bytes:
                return None
            size += len(key)
        if headers:
            for name, header in headers.items():
                if type(name) is not str or type(header) is not bytes:
                    return None
                size += len(name.encode()) + len(header)
        if topic != current or topic is None:
            if type(topic) is not str:
                return None
            if current is not None:
                sizes[current], largest[current] = total, top
            if topic not in positions:
                if full_match(topic) is None or topic in (".", ".."):
                    return None
                positions[topic] = []
                sizes[topic] = largest[topic] = 0
            mine, current, total, top = positions[topic], topic, sizes[topic], largest[topic]
        mine.append(position)
        total += size
        if size > top:  # noqa: PLR1730 -- a branch costs less than a max() call per record
            top = size
    if current is not None:
        sizes[current], largest[current] = total, top
    shares = {name: TopicShare(p, sizes[name], largest[name]) for name, p in positions.items()}
    return BatchSummary(shares, ttls, append_time, flags)


class _WithProperties(Protocol):
    """What ``batch_fits`` reads of a topic (``TopicState`` has it)."""

    @property
    def properties(self) -> TopicProperties:
        """The topic's limits."""
        ...


def batch_fits(
    summary: BatchSummary, topics: Mapping[str, _WithProperties], auto_create: bool
) -> bool:
    """Would ``raftlog.topics.machine.check_entry`` accept the record batch ``summary``
    describes (missing topics allowed with ``auto_create``)? False: decode the batch in full
    for the precise refusal."""
    for name, share in summary.topics.items():
        state = topics.get(name)
        if state is None:
            if not auto_create:
                return False
            continue
        limit = state.properties.max_record_bytes
        if (limit is not None and share.largest > limit) or state.properties.compacted:
            return False  # a compacted topic's records are stored by key: decode them
    return True


def _array_header(data: bytes, at: int) -> tuple[int, int] | None:
    """``(length, where its items start)`` of the MessagePack array at ``at`` (None: not an
    array there)."""
    if at >= len(data):
        return None
    lead = data[at]
    if 0x90 <= lead <= 0x9F:
        return lead & 0x0F, at + 1
    if lead == 0xDC and at + 3 <= len(data):
        return int.from_bytes(data[at + 1 : at + 3], "big"), at + 3
    if lead == 0xDD and at + 5 <= len(data):
        return int.from_bytes(data[at + 1 : at + 5], "big"), at + 5
    return None


def _skip_str(data: bytes, at: int) -> int | None:
    """Where the MessagePack string at ``at`` ends (None: not a string there)."""
    if at >= len(data):
        return None
    lead, widths = data[at], {0xD9: 1, 0xDA: 2, 0xDB: 4}
    if 0xA0 <= lead <= 0xBF:
        return at + 1 + (lead & 0x1F)
    width = widths.get(lead)
    if width is None:
        return None
    return at + 1 + width + int.from_bytes(data[at + 1 : at + 1 + width], "big")


def record_count(data: bytes) -> int | None:
    """How many records topic entry ``data`` would publish, read from its array headers
    alone -- no record is decoded (None: not an entry of records, or malformed where the
    count sits; the full decoder then names the error).

    Why: the leader caps records per entry (``max_records_per_entry``) before it decodes
    anything: one publish of 1.25 million empty records (one 10 MiB entry) took ~3 s to
    decode and apply on every peer, and 13 elections followed
    (``tests/faults/test_many_records.py``)."""
    if len(data) <= HEADER_SIZE or data[:4] != MAGIC:
        return None
    kind, at = data[5], HEADER_SIZE
    if kind == KIND_RECORDS:
        found = _array_header(data, at)
        return None if found is None else found[0]
    if kind == KIND_TX_STORE:  # [txid, records] or [txid, records, actor]
        outer = _array_header(data, at)
        end = None if outer is None or outer[0] < 2 else _skip_str(data, outer[1])
        found = None if end is None else _array_header(data, end)
        return None if found is None else found[0]
    if kind == KIND_CONDITIONAL:  # [conditions, records]: the conditions are few (64 at most)
        unpacker = msgpack.Unpacker(raw=False)
        unpacker.feed(data[at:])
        try:
            if unpacker.read_array_header() != 2:
                return None
            unpacker.skip()
            return int(unpacker.read_array_header())
        except (ValueError, msgpack.UnpackException):
            return None
    return None
