"""Key-compacted topics (issue #29): the latest record per key, kept in the topic index.

A topic with ``cleanup_policy`` ``compact`` (or ``compact,delete``) keeps only the latest
record of each key. Its records are copied into the topic machine's RocksDB when they apply,
so the topic no longer needs the log: it does not pin log compaction (the
``RetainedFloor`` of ``raftlog.topics.retention_schedule`` skips it), and its live state
travels in the machine's snapshot (section ``"compacted"``) and so in InstallSnapshot. Keys
(``raftlog.topics.index`` owns the database; these two prefixes are this module's)::

    k <topic> 00 <key>               -> u64 index, u32 position, u64 append time,
                                        u64 ttl_ms (0: none), u8 tombstone: the key's
                                        latest record (its "pointer")
    c <topic> 00 <idx:8> <pos:4>     -> msgpack [key, value | nil, headers, timestamp,
                                        append time, ttl_ms | nil]: a record by id

Reads (``TR`` of a compacted topic, ``KG``, ``KK``) return a record only when it is its
key's latest and still alive on the log clock: a tombstone lives ``tombstone_retention_ms``
after its append time, a record with its own ``ttl_ms`` that long, and with ``compact,delete``
every record ``retention_ms``. Superseded copies stay in ``c`` until the log is compacted
past their successor (a snapshot at any index the log still has must find the latest record
of every key at or below it); ``collect`` then drops them, and the expired latest ones
(judged at the log clock of the snapshot index, which every later apply has passed, so the
answer is the same on a peer that never saw them).

Every decision of ``live`` depends on the log alone (the pointer and the log clock), so a
conditional publish per key (``raftlog.topics.records_kv``) is decided identically by every
peer, whether or not its ``collect`` already removed an expired key.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Final

import msgpack
from rocksdict import WriteBatch

from raftlog.topics.index import TopicIndex, u64
from raftlog.topics.properties import DEFAULT_TOMBSTONE_RETENTION_MS, TopicProperties
from raftlog.topics.records import LoggedRecord, Record, RecordId, SkipBudget

_POINTER: Final = struct.Struct(">QIQQB")
_U32: Final = struct.Struct(">I")
_SEP: Final = b"\x00"
MAX_KEYS_ANSWER: Final = 10_000
"""Most keys one ``KK`` answer lists (the client pages on with ``after``)."""
KEY_SKIPS: Final = 10_000  # dead keys (deleted, expired) one KK answer passes, ~2 µs each


@dataclass(frozen=True, slots=True)
class Pointer:
    """A key's latest record: where it is and what decides whether it is still alive."""

    id: RecordId
    append_time_ms: int
    ttl_ms: int | None
    tombstone: bool

    def expires_at(self, props: TopicProperties) -> int | None:
        """The log-clock time at which this record stops being alive (None: never)."""
        dues = []
        if self.tombstone:
            retention = props.tombstone_retention_ms or DEFAULT_TOMBSTONE_RETENTION_MS
            dues.append(self.append_time_ms + retention)
        if self.ttl_ms is not None:
            dues.append(self.append_time_ms + self.ttl_ms)
        if props.cleanup_policy == "compact,delete" and props.retention_ms is not None:
            dues.append(self.append_time_ms + props.retention_ms)
        return min(dues, default=None)

    def live(self, props: TopicProperties, clock_ms: int) -> bool:
        """Still alive at log clock ``clock_ms`` (a tombstone: still remembered)?"""
        due = self.expires_at(props)
        return due is None or clock_ms < due


def _prefix(kind: bytes, topic: str) -> bytes:
    return kind + topic.encode() + _SEP


def _pointer_key(topic: str, key: bytes) -> bytes:
    return _prefix(b"k", topic) + key


def _record_key(topic: str, rid: RecordId) -> bytes:
    return _prefix(b"c", topic) + u64(rid.index) + _U32.pack(rid.position)


def _rid_of(record_key: bytes) -> RecordId:
    return RecordId(
        int.from_bytes(record_key[-12:-4], "big"), int.from_bytes(record_key[-4:], "big")
    )


def _successor(prefix: bytes) -> bytes | None:
    """The first byte string after every string starting with ``prefix`` (None: none)."""
    trimmed = prefix.rstrip(b"\xff")
    return trimmed[:-1] + bytes((trimmed[-1] + 1,)) if trimmed else None


def _pack_pointer(p: Pointer) -> bytes:
    return _POINTER.pack(
        p.id.index, p.id.position, p.append_time_ms, p.ttl_ms or 0, int(p.tombstone)
    )


def _unpack_pointer(value: bytes) -> Pointer:
    index, position, append, ttl, tombstone = _POINTER.unpack(value)
    return Pointer(RecordId(index, position), append, ttl or None, bool(tombstone))


def _pack_record(record: Record, append_time_ms: int) -> bytes:
    value = None if record.tombstone else record.value
    body = [
        record.key,
        value,
        dict(record.headers),
        record.timestamp_ms,
        append_time_ms,
        record.ttl_ms,
    ]
    packed: bytes = msgpack.packb(body, use_bin_type=True)
    return packed


def _unpack_record(topic: str, rid: RecordId, value: bytes) -> LoggedRecord:
    key, data, headers, timestamp, append, ttl = msgpack.unpackb(value, raw=False)
    record = Record(
        topic, b"" if data is None else data, key, headers, timestamp, ttl, data is None
    )
    return LoggedRecord(rid, append, record)


class CompactedStore:
    """The latest record per key of every compacted topic (see the module docstring).
    Writes go into the apply call's batch; ``begin`` starts an overlay so that lookups
    during one apply call see what it wrote before (the batch is not readable)."""

    def __init__(self, index: TopicIndex) -> None:
        self._index = index
        self._pending: dict[tuple[str, bytes], Pointer] = {}
        self._dropped: set[str] = set()

    def begin(self) -> None:
        """A new apply call: its batch starts empty, and so does the overlay."""
        self._pending.clear()
        self._dropped.clear()

    # -- writes ----------------------------------------------------------------------------
    def put(
        self, batch: WriteBatch, topic: str, rid: RecordId, append_ms: int, record: Record
    ) -> None:
        """``record`` (keyed: ``raftlog.topics.rules`` refuses others) is its key's latest."""
        key = record.key if record.key is not None else b""
        pointer = Pointer(rid, append_ms, record.ttl_ms, record.tombstone)
        batch.put(_record_key(topic, rid), _pack_record(record, append_ms))
        batch.put(_pointer_key(topic, key), _pack_pointer(pointer))
        self._pending[(topic, key)] = pointer

    def drop_topic(self, batch: WriteBatch, topic: str) -> None:
        """The topic was deleted or re-created: forget every key of it."""
        for kind in (b"c", b"k"):
            prefix = _prefix(kind, topic)
            batch.delete_range(prefix, prefix[:-1] + b"\x01")
        self._dropped.add(topic)
        for pending in [k for k in self._pending if k[0] == topic]:
            del self._pending[pending]

    # -- lookups ---------------------------------------------------------------------------
    def pointer(self, topic: str, key: bytes) -> Pointer | None:
        """The key's latest record as of everything applied (this apply call included)."""
        pending = self._pending.get((topic, key))
        if pending is not None or topic in self._dropped:
            return pending
        value = self._index.get(_pointer_key(topic, key), "compacted key")
        return None if value is None else _unpack_pointer(value)

    def current(
        self, topic: str, key: bytes, props: TopicProperties, clock_ms: int
    ) -> RecordId | None:
        """What a per-key expectation compares with: the key's latest record while it is
        alive (a remembered tombstone included), else None."""
        pointer = self.pointer(topic, key)
        return pointer.id if pointer is not None and pointer.live(props, clock_ms) else None

    def get(
        self, topic: str, key: bytes, props: TopicProperties, clock_ms: int
    ) -> LoggedRecord | None:
        """``KG``: the key's live value (None: absent, deleted or expired)."""
        pointer = self.pointer(topic, key)
        if pointer is None or pointer.tombstone or not pointer.live(props, clock_ms):
            return None
        value = self._index.get(_record_key(topic, pointer.id), "compacted record")
        return None if value is None else _unpack_record(topic, pointer.id, value)

    def keys(
        self,
        topic: str,
        prefix: bytes,
        after: bytes | None,
        limit: int,
        *,
        props: TopicProperties,
        clock_ms: int,
        skips: int | None = None,
    ) -> tuple[list[tuple[bytes, RecordId]], bool, bytes | None]:
        """``KK``: live keys starting with ``prefix`` (after ``after``), in byte order, with
        their revisions; whether more follow; and, when it passed over ``skips`` dead keys
        (deleted or expired: they stay until log compaction), the last one (go on after)."""
        base = _prefix(b"k", topic)
        start = prefix if after is None or after + b"\x00" < prefix else after + b"\x00"
        end = _successor(prefix)
        lo, hi = base + start, base + end if end is not None else base[:-1] + b"\x01"
        out: list[tuple[bytes, RecordId]] = []
        passed: bytes | None = None
        skips = KEY_SKIPS if skips is None else skips
        for raw_key, value in self._index.items(lo, hi, "compacted keys"):
            key = raw_key[len(base) :]
            if not key.startswith(prefix):
                break
            pointer = _unpack_pointer(value)
            if pointer.tombstone or not pointer.live(props, clock_ms):
                if skips <= 0:
                    return out, True, passed
                skips, passed = skips - 1, key
                continue
            if len(out) >= limit:
                return out, True, None
            out.append((key, pointer.id))
        return out, False, None

    def records(
        self, topic: str, start: RecordId, props: TopicProperties, clock_ms: int,
        skips: SkipBudget | None = None,
    ) -> Iterator[LoggedRecord]:
        """``TR``: from ``start`` on, in log order, every record still its key's latest and
        alive (tombstones while remembered); a copy passed over spends ``skips``."""
        prefix = _prefix(b"c", topic)
        lo = _record_key(topic, start)
        for raw_key, value in self._index.items(lo, prefix[:-1] + b"\x01", "compacted records"):
            item = _unpack_record(topic, _rid_of(raw_key), value)
            if self._is_live(topic, item, props, clock_ms):
                yield item
            elif skips is not None and not skips.skip(item.id):
                return

    def edges(
        self, topic: str, created: int, props: TopicProperties, clock_ms: int, scan: int
    ) -> tuple[RecordId | None, LoggedRecord | None]:
        """``TD``: the first live record's id and the last live record, looking at most
        ``scan`` stored copies from each end (a walk of them held the loop ~0.6 s per
        100,000); past that the first is a lower bound, the last the newest copy stored."""
        prefix = _prefix(b"c", topic)
        lo, hi = _record_key(topic, RecordId(created, 0)), prefix[:-1] + b"\x01"
        first = last = None
        for looked, (raw_key, value) in enumerate(self._index.items(lo, hi, "compacted first")):
            item = _unpack_record(topic, _rid_of(raw_key), value)
            if looked + 1 >= scan or self._is_live(topic, item, props, clock_ms):
                first = item.id
                break
        if first is None:
            return None, None
        backwards = self._index.items_backwards(lo, hi, "compacted last")
        newest: LoggedRecord | None = None
        for looked, (raw_key, value) in enumerate(backwards):
            item = _unpack_record(topic, _rid_of(raw_key), value)
            newest = newest or item
            if (live := self._is_live(topic, item, props, clock_ms)) or looked + 1 >= scan:
                last = item if live else newest
                break
        return first, last

    def _is_live(
        self, topic: str, item: LoggedRecord, props: TopicProperties, clock_ms: int
    ) -> bool:
        """Whether the stored copy ``item`` is its key's latest and alive."""
        pointer = self.pointer(topic, item.record.key if item.record.key is not None else b"")
        return pointer is not None and pointer.id == item.id and pointer.live(props, clock_ms)

    def stats(self, topic: str, props: TopicProperties, clock_ms: int) -> tuple[int, int]:
        """``(live keys, their bytes)`` of a topic: the whole scan of :meth:`stats_slice`
        (tests; the peer counts in slices, ``raftlog.topics.kv_state``)."""
        keys, size, _, _ = self.stats_slice(topic, props, clock_ms, None, None)
        return keys, size

    def stats_slice(
        self,
        topic: str,
        props: TopicProperties,
        clock_ms: int,
        after: bytes | None,
        limit: int | None,
    ) -> tuple[int, int, int, bytes | None]:
        """``(live keys, their bytes, pointers read, resume)`` of the topic's keys after
        pointer key ``after`` (None: from the first), at most ``limit`` pointers (None: all);
        ``resume`` is the last pointer key read when the limit stopped the scan, None at the
        end.
        A pointer and its record read cost ~15 µs: a topic of a million keys is counted a
        slice at a time, never in one pass of the loop."""
        keys = size = read = 0
        base = _prefix(b"k", topic)
        lo = base if after is None else after + b"\x00"
        for raw_key, value in self._index.items(lo, base[:-1] + b"\x01", "compacted stats"):
            if limit is not None and read >= max(limit, 1):
                return keys, size, read, after
            read += 1
            after = raw_key
            pointer = _unpack_pointer(value)
            if pointer.tombstone or not pointer.live(props, clock_ms):
                continue
            item = self._index.get(_record_key(topic, pointer.id), "compacted record")
            if item is not None:
                keys += 1
                size += _unpack_record(topic, pointer.id, item).record.size
        return keys, size, read, None

    # -- snapshots and clean-up ------------------------------------------------------------
    def latest_slice(
        self, topic: str, start: RecordId, upto: RecordId,
        latest: dict[bytes, tuple[RecordId, bytes]], limit: int,
    ) -> tuple[RecordId | None, int]:
        """Per key, its latest stored copy below ``upto``: adds the copies from ``start``
        on to ``latest`` -- which stays in the order of those copies' ids -- at most ``limit``
        of them; returns where to go on (None: done) and how many it read."""
        read = 0
        for rid, key, value in self.copies(topic, start, upto):
            if read >= limit:
                return rid, read
            read += 1
            latest.pop(key, None)  # to the end: the dict keeps the copies' log order
            latest[key] = (rid, value)
        return None, read

    @staticmethod
    def live_rows(
        topic: str, copies: Iterable[tuple[RecordId, bytes]], props: TopicProperties,
        clock_ms: int,
    ) -> list[list[Any]]:
        """A topic's part of the section ``"compacted"``: the live ones of ``copies`` (the
        latest per key, in log order; log clock ``clock_ms``) as ``[index, position,
        record body]``, in that order."""
        rows = []
        for rid, value in copies:
            item = _unpack_record(topic, rid, value)
            pointer = Pointer(rid, item.append_time_ms, item.record.ttl_ms, item.record.tombstone)
            if pointer.live(props, clock_ms):
                rows.append([rid.index, rid.position, value])
        return rows

    def restore(self, batch: WriteBatch, section: object) -> set[tuple[int, int]]:
        """Write a snapshot's ``"compacted"`` section (``snapshot``) into ``batch``; returns
        the ``(TTL deadline, entry index)`` of its records with their own TTL, which the
        machine's deadline keys must know (``TopicIndex.put_ttl_deadline``)."""
        if not isinstance(section, dict):
            raise ValueError("unsupported topic snapshot format (compacted)")
        deadlines = set()
        for name, rows in section.items():
            for index, position, value in rows:
                rid = RecordId(int(index), int(position))
                item = _unpack_record(name, rid, value)
                self.put(batch, name, rid, item.append_time_ms, item.record)
                if item.record.ttl_ms is not None:
                    deadlines.add((item.append_time_ms + item.record.ttl_ms, rid.index))
        return deadlines

    def copies(
        self, topic: str, start: RecordId, upto: RecordId
    ) -> Iterator[tuple[RecordId, bytes, bytes]]:
        """``(id, key, stored value)`` of the topic's stored copies in ``[start, upto)``, in
        log order (the clean-up after a log compaction walks them: ``index_cleanup``)."""
        lo, hi = _record_key(topic, start), _record_key(topic, upto)
        for raw_key, value in self._index.items(lo, hi, "compacted copies"):
            yield _rid_of(raw_key), msgpack.unpackb(value, raw=False)[0] or b"", value

    @staticmethod
    def drop_copy(batch: WriteBatch, topic: str, rid: RecordId, key: bytes | None = None) -> None:
        """Delete a stored copy; with ``key``, that key's pointer too (the copy was its last)."""
        batch.delete(_record_key(topic, rid))
        if key is not None:
            batch.delete(_pointer_key(topic, key))
