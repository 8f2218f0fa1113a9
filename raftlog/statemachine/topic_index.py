"""The topic machine's RocksDB layout (``<data_dir>/topics``): keys, writes and seeks.

Keys (raw bytes; integers unsigned big-endian so byte order is numeric order)::

    m applied            -> u64  last_applied (written in the same batch as the index)
    m time               -> u64  effective append time of the last record entry
    m base_time          -> u64  effective append time as of the last restored snapshot
    v <topic> 00 <idx:8> -> topic version after the admin change at idx (msgpack
                            [retention_ms, max_bytes, created_index]; empty = deleted)
    r <topic> 00 <idx:8> -> u64 append time + runs of (u32 first position, u32 count): the
                            per-topic record index, one key per entry and topic (a batch of
                            100 records of one topic costs one key, not 100)
    a <time:8> <idx:8>   -> ""   time index: append time -> entry index
    i <idx:8>            -> u64  entry index -> append time (for snapshots "as of" an index)

Topic names never contain 00 (``raftlog.records.check_topic_name``), so each topic's keys are
one contiguous range and reads never touch another topic's keys. Append times are
non-decreasing in log order (the machine clamps them), so the ``a`` keys sort by index too:
"the first entry appended at or after T" is one seek. Versions instead of a single current
value let ``snapshot(index)`` produce the metadata exactly as of ``index`` while the machine
has already applied further.

Nothing here syncs: the index is rebuilt from the log after a crash (see ``topics``).
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import msgpack
from rocksdict import WriteBatch

from raftlog.records import RecordId, TopicProperties
from raftlog.storage._rocksdb import RocksDatabase

APPLIED_KEY: Final = b"mapplied"
TIME_KEY: Final = b"mtime"
BASE_TIME_KEY: Final = b"mbase_time"
_U64: Final = struct.Struct(">Q")
_RUN: Final = struct.Struct(">II")
_SEP: Final = b"\x00"
_END: Final = b"\x01"


@dataclass(frozen=True, slots=True)
class TopicState:
    """One topic as applied at some index: its properties and the index of the command that
    created it (kept per version so reads as of an index are exact)."""

    properties: TopicProperties
    created_index: int


def u64(n: int) -> bytes:
    """Big-endian 8-byte key part, so RocksDB's byte order is numeric order."""
    return _U64.pack(n)


def _read_u64(value: bytes | None) -> int:
    return 0 if value is None else int(_U64.unpack(value)[0])


def _topic_prefix(kind: bytes, topic: str) -> bytes:
    return kind + topic.encode() + _SEP


def entry_key(topic: str, index: int) -> bytes:
    """Key of one topic's positions inside one log entry (topic prefix + index): a range scan
    walks a topic in log order."""
    return _topic_prefix(b"r", topic) + u64(index)


def _key_index(key: bytes) -> int:
    return int(_U64.unpack_from(key, len(key) - 8)[0])


def _pack_positions(time_ms: int, positions: list[int]) -> bytes:
    """The append time, then the ascending ``positions`` as runs of consecutive ones."""
    out = [u64(time_ms)]
    start = previous = positions[0]
    for position in positions[1:]:
        if position != previous + 1:
            out.append(_RUN.pack(start, previous - start + 1))
            start = position
        previous = position
    out.append(_RUN.pack(start, previous - start + 1))
    return b"".join(out)


def _unpack_positions(value: bytes) -> tuple[int, Iterator[int]]:
    """(append time, positions) of one entry's value."""
    time_ms = int(_U64.unpack_from(value)[0])
    runs = _RUN.iter_unpack(value[8:])
    return time_ms, (p for first, count in runs for p in range(first, first + count))


def _pack_state(state: TopicState | None) -> bytes:
    if state is None:
        return b""
    props = state.properties
    packed: bytes = msgpack.packb([props.retention_ms, props.max_bytes, state.created_index])
    return packed


def _unpack_state(value: bytes) -> TopicState | None:
    if not value:
        return None
    retention, max_bytes, created = msgpack.unpackb(value)
    return TopicState(TopicProperties(retention, max_bytes), created)


class TopicIndex:
    """Typed access to the topic database; writes go into a caller's ``WriteBatch``."""

    def __init__(self, path: Path) -> None:
        self._db = RocksDatabase(path)

    def close(self) -> None:
        """Release this index's hold on its database."""
        self._db.release()

    @staticmethod
    def batch() -> WriteBatch:
        """A new write batch: everything one apply changes is written together."""
        return WriteBatch(raw_mode=True)

    def write(self, batch: WriteBatch, what: str) -> None:
        """Unsynced: a crash loses at most a suffix, which is re-applied from the log."""
        self._db.write(batch, False, what)

    # -- machine position ------------------------------------------------------------------
    def load_position(self) -> tuple[int, int, int]:
        """``(last_applied, last_time, base_time)``."""
        return (
            _read_u64(self._db.get(APPLIED_KEY, "topics last_applied")),
            _read_u64(self._db.get(TIME_KEY, "topics time")),
            _read_u64(self._db.get(BASE_TIME_KEY, "topics base time")),
        )

    @staticmethod
    def put_position(batch: WriteBatch, applied: int, last_time: int) -> None:
        """Record the applied index and last append time in ``batch`` (the index resumes from
        here after a restart)."""
        batch.put(APPLIED_KEY, u64(applied))
        batch.put(TIME_KEY, u64(last_time))

    # -- topic metadata (versioned) --------------------------------------------------------
    @staticmethod
    def put_version(batch: WriteBatch, topic: str, index: int, state: TopicState | None) -> None:
        """Record the state of ``topic`` as of ``index`` (None: deleted) in ``batch``."""
        batch.put(_topic_prefix(b"v", topic) + u64(index), _pack_state(state))

    def topics_as_of(self, index: int | None = None) -> dict[str, TopicState]:
        """Every live topic after applying entries up to ``index`` (None: all versions)."""
        out: dict[str, TopicState] = {}
        for key, value in self._db.items(b"v", b"w", "topic versions"):
            at = int(_U64.unpack(key[-8:])[0])
            if index is not None and at > index:
                continue
            name = key[1:-9].decode()
            state = _unpack_state(value)
            if state is None:
                out.pop(name, None)
            else:
                out[name] = state
        return out

    # -- records ---------------------------------------------------------------------------
    @staticmethod
    def put_entry(
        batch: WriteBatch, index: int, time_ms: int, records: list[tuple[str, int]]
    ) -> None:
        """Index one record entry: ``records`` are its ``(topic, position)`` pairs."""
        stamp = u64(time_ms)
        by_topic: dict[str, list[int]] = {}
        for topic, position in records:
            by_topic.setdefault(topic, []).append(position)
        for topic, positions in by_topic.items():
            batch.put(entry_key(topic, index), _pack_positions(time_ms, sorted(positions)))
        batch.put(b"a" + stamp + u64(index), b"")
        batch.put(b"i" + u64(index), stamp)

    @staticmethod
    def delete_topic_records(batch: WriteBatch, topic: str, below: int | None = None) -> None:
        """Drop a topic's record keys (all, or those of entries below index ``below``)."""
        prefix = _topic_prefix(b"r", topic)
        batch.delete_range(prefix, prefix[:-1] + _END if below is None else prefix + u64(below))

    def records(self, topic: str, start: RecordId) -> Iterator[tuple[RecordId, int]]:
        """``(id, append time)`` of ``topic``'s records from ``start`` on, in log order."""
        prefix = _topic_prefix(b"r", topic)
        lo = entry_key(topic, start.index)
        for key, value in self._db.items(lo, prefix[:-1] + _END, "topic records"):
            index = _key_index(key)
            time_ms, positions = _unpack_positions(value)
            for position in positions:
                if index > start.index or position >= start.position:
                    yield RecordId(index, position), time_ms

    def record_bounds(self, topic: str, start: RecordId) -> tuple[RecordId, RecordId] | None:
        """First and last record id of ``topic`` at or after ``start`` (two seeks)."""
        first = next(self.records(topic, start), None)
        if first is None:
            return None
        prefix = _topic_prefix(b"r", topic)
        _, last_key = self._db.bounds(entry_key(topic, start.index), prefix[:-1] + _END, "records")
        value = None if last_key is None else self._db.get(last_key, "topic records")
        if last_key is None or value is None:
            return None
        *_, last_position = _unpack_positions(value)[1]
        return first[0], RecordId(_key_index(last_key), last_position)

    def record_counts(self, topic: str, lo: int, hi: int) -> Iterator[tuple[int, int]]:
        """``(entry index, records of topic)`` for ``topic``'s entries in ``[lo, hi]`` (one
        scan of its keys: the TC record counts, without reading entries)."""
        for key, value in self._db.items(entry_key(topic, lo), entry_key(topic, hi + 1), "counts"):
            yield _key_index(key), sum(count for _, count in _RUN.iter_unpack(value[8:]))

    def record_entries(self, lo: int, hi: int) -> Iterator[int]:
        """Indexes of the record entries in ``[lo, hi]`` (the ``i`` keys), in order."""
        for key, _ in self._db.items(b"i" + u64(lo), b"i" + u64(hi + 1), "record entries"):
            yield int(_U64.unpack(key[1:])[0])

    def record_time(self, topic: str, rid: RecordId) -> int:
        """The append time of the entry holding record ``rid`` (0 when the index has none)."""
        value = self._db.get(entry_key(topic, rid.index), "record time")
        return 0 if value is None else _unpack_positions(value)[0]

    # -- time ------------------------------------------------------------------------------
    def first_index_at(self, time_ms: int) -> int | None:
        """Index of the first record entry appended at or after ``time_ms`` (one seek)."""
        first, _ = self._db.bounds(b"a" + u64(time_ms), b"b", "time index")
        return None if first is None else int(_U64.unpack(first[-8:])[0])

    def time_at(self, index: int) -> tuple[int, int] | None:
        """``(entry index, time)`` of the last record entry at or below ``index``."""
        _, last = self._db.bounds(b"i", b"i" + u64(index + 1), "entry times")
        if last is None:
            return None
        return int(_U64.unpack(last[1:])[0]), _read_u64(self._db.get(last, "entry time"))

    # -- housekeeping ----------------------------------------------------------------------
    def drop_below(self, batch: WriteBatch, floor: int, topics: list[str]) -> None:
        """Entries below index ``floor`` left the log (compaction): drop their keys, except
        the last ``i`` key below it, which ``time_at`` still needs for snapshots."""
        for topic in topics:
            self.delete_topic_records(batch, topic, floor)
        below = self.time_at(floor - 1)
        if below is None:
            return
        last_index, last_time = below
        batch.delete_range(b"a", b"a" + u64(last_time) + u64(last_index))
        batch.delete_range(b"i", b"i" + u64(last_index))

    @staticmethod
    def clear(batch: WriteBatch) -> None:
        """Queue the removal of everything (a snapshot restore rebuilds the index)."""
        batch.delete_range(b"\x00", b"\xff")

    @staticmethod
    def put_base_time(batch: WriteBatch, time_ms: int) -> None:
        """Record the append time a restored snapshot starts from, so times stay monotonic across
        it."""
        batch.put(BASE_TIME_KEY, u64(time_ms))
