"""The topic machine's RocksDB layout (``<data_dir>/topics``): keys, writes and seeks.

Keys (raw bytes; integers unsigned big-endian so byte order is numeric order)::

    m applied            -> u64  last_applied (written in the same batch as the index)
    m time               -> u64  the log clock: effective append time of the last stamped
                            topic entry (records, admin commands, the leader's clock ticks)
    m base_time          -> u64  the log clock as of the last restored snapshot
    v <topic> 00 <idx:8> -> topic version after the admin change at idx: the topic's
                            ``TopicState`` in its versioned codec (``state``); empty =
                            deleted
    r <topic> 00 <idx:8> -> u64 append time, u64 bytes published to the topic before this
                            entry, then runs of (u32 first position, u32 count): the
                            per-topic record index, one key per entry and topic (a batch of
                            100 records of one topic costs one key, not 100)
    b <topic> 00 <cum:8> <idx:8> -> ""  size index: bytes published to the topic up to and
                            including entry idx; "the first entry past N bytes" is one seek,
                            and the topic's last key holds the bytes published so far
    a <time:8> <idx:8>   -> ""   time index: append time -> record entry index
    i <idx:8>            -> u64  record entry index -> append time (for snapshots "as of")
    d <due:8> <idx:8>    -> ""   a TTL deadline: a record of entry idx expires by its own TTL
                            when the log clock reaches due (one key per entry and due); the
                            leader's clock finds the next one in one seek, after a restart too
    t <commit:8>         -> msgpack [[store index, records], ...]: the stores a transaction
                            commit made visible, in order (readers resolve a commit's record
                            positions through it; ``topic_tx``)
    e <begin:8>          -> a transaction (``topic_tx``): id, deadline, totals, outcome
    x <txid>             -> u64  begin index of the latest transaction with this id
    y <begin:8> <store:8> -> msgpack [records, bytes]: one store of a transaction

Topic names never contain 00 (``raftlog.topics.records.check_topic_name``), so each topic's keys are
one contiguous range and reads never touch another topic's keys. Append times are
non-decreasing in log order (the machine clamps them), so the ``a`` keys sort by index too:
"the first entry appended at or after T" is one seek. Versions instead of a single current
value let ``snapshot(index)`` produce the metadata exactly as of ``index`` while the machine
has already applied further. Byte counts only ever matter as differences ("bytes published
after record r"), so they may restart from 0 after a snapshot restore.

Nothing here syncs: the index is rebuilt from the log after a crash (see ``topics``).
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import msgpack
from rocksdict import WriteBatch

from raftlog.storage._rocksdb import RocksDatabase
from raftlog.topics.records import Record
from raftlog.topics.state import TopicState, decode_state, encode_state

APPLIED_KEY: Final = b"mapplied"
TIME_KEY: Final = b"mtime"
BASE_TIME_KEY: Final = b"mbase_time"
_U64: Final = struct.Struct(">Q")
_ENTRY_HEAD: Final = struct.Struct(">QQ")
_RUN: Final = struct.Struct(">II")
_SEP: Final = b"\x00"
_END: Final = b"\x01"


Version = tuple[bytes, str, int, TopicState | None]


@dataclass(frozen=True, slots=True)
class EntryRecords:
    """One record entry of one topic, as the index knows it."""

    index: int
    append_time_ms: int
    bytes_before: int
    """Bytes published to the topic (this incarnation) before this entry."""
    positions: tuple[int, ...]


def u64(n: int) -> bytes:
    """Big-endian 8-byte key part, so RocksDB's byte order is numeric order."""
    return _U64.pack(n)


def _read_u64(value: bytes | None) -> int:
    return 0 if value is None else int(_U64.unpack(value)[0])


def group_by_topic(
    records: Iterable[Record],
) -> tuple[dict[str, tuple[list[int], int]], list[tuple[str, int, int, int]]]:
    """What ``TopicIndex.put_entry`` takes for one entry's records -- each topic's positions
    and bytes, topics in first-seen order -- and the records with their own TTL as (topic,
    position, ttl_ms, size). Shared by a record batch's apply and a transaction's commit."""
    by_topic: dict[str, tuple[list[int], int]] = {}
    ttls: list[tuple[str, int, int, int]] = []
    for position, record in enumerate(records):
        name, size = record.topic, record.size
        positions, total = by_topic.get(name, ([], 0))
        positions.append(position)
        by_topic[name] = (positions, total + size)
        if record.ttl_ms is not None:
            ttls.append((name, position, record.ttl_ms, size))
    return by_topic, ttls


def _topic_prefix(kind: bytes, topic: str) -> bytes:
    return kind + topic.encode() + _SEP


def entry_key(topic: str, index: int) -> bytes:
    """Key of one topic's records inside one log entry (topic prefix + index): a range scan
    walks a topic in log order."""
    return _topic_prefix(b"r", topic) + u64(index)


def _key_index(key: bytes) -> int:
    return int(_U64.unpack_from(key, len(key) - 8)[0])


def _pack_entry(time_ms: int, bytes_before: int, positions: list[int]) -> bytes:
    """The head, then the ascending ``positions`` as runs of consecutive ones."""
    out = [_ENTRY_HEAD.pack(time_ms, bytes_before)]
    start = previous = positions[0]
    for position in positions[1:]:
        if position != previous + 1:
            out.append(_RUN.pack(start, previous - start + 1))
            start = position
        previous = position
    out.append(_RUN.pack(start, previous - start + 1))
    return b"".join(out)


def _unpack_entry(index: int, value: bytes) -> EntryRecords:
    time_ms, before = _ENTRY_HEAD.unpack_from(value)
    runs = _RUN.iter_unpack(value[_ENTRY_HEAD.size :])
    positions = tuple(p for first, count in runs for p in range(first, first + count))
    return EntryRecords(index, int(time_ms), int(before), positions)


def _pack_state(state: TopicState | None) -> bytes:
    """A version row's value: the state's one codec (``state``), or empty once deleted."""
    if state is None:
        return b""
    packed: bytes = msgpack.packb(encode_state(state))
    return packed


def _unpack_state(value: bytes) -> TopicState | None:
    """Any version row ever written (layouts 1-3, ``state``); None: deleted."""
    if not value:
        return None
    return decode_state(msgpack.unpackb(value, raw=False))


class TopicIndex:
    """Typed access to the topic database; writes go into a caller's ``WriteBatch``."""

    def __init__(self, path: Path) -> None:
        self._db = RocksDatabase(path)
        self._first_at: tuple[int, int | None] | None = None  # kept by first_index_at

    def close(self) -> None:
        """Release this index's hold on its database."""
        self._db.release()

    @staticmethod
    def batch() -> WriteBatch:
        """A new write batch: everything one apply changes is written together."""
        return WriteBatch(raw_mode=True)

    def write(self, batch: WriteBatch, what: str, *, sync: bool = False) -> None:
        """Unsynced by default: a crash loses at most a suffix, re-applied from the log."""
        self._first_at = None
        self._db.write(batch, sync, what)

    # -- raw access for the transaction keys (``topic_tx`` owns their layout) ---------------
    def get(self, key: bytes, what: str) -> bytes | None:
        """The value of ``key`` (None: absent)."""
        return self._db.get(key, what)

    def items(self, lo: bytes, hi: bytes, what: str) -> Iterator[tuple[bytes, bytes]]:
        """Keys and values in ``[lo, hi)``, in key order."""
        return self._db.items(lo, hi, what)

    def items_backwards(self, lo: bytes, hi: bytes, what: str) -> Iterator[tuple[bytes, bytes]]:
        """Keys and values in ``[lo, hi)``, the last first."""
        return self._db.items_backwards(lo, hi, what)

    def commit_stores(self, commit_index: int) -> list[tuple[int, int]] | None:
        """The ``(store index, records)`` a transaction commit at ``commit_index`` made
        visible, in order (None: no commit there)."""
        value = self._db.get(b"t" + u64(commit_index), "transaction commit")
        return None if value is None else [(int(s), int(n)) for s, n in msgpack.unpackb(value)]

    def commits_in(self, lo: int, hi: int) -> Iterator[tuple[int, list[tuple[int, int]]]]:
        """Every transaction commit in ``[lo, hi]`` with its ``(store index, records)``, in
        log order (the ``t`` keys): a reader resolves many commits in one answer."""
        for key, value in self._db.items(b"t" + u64(lo), b"t" + u64(hi + 1), "commits"):
            stores = [(int(s), int(n)) for s, n in msgpack.unpackb(value)]
            yield int(_U64.unpack(key[1:])[0]), stores

    @staticmethod
    def put_commit_stores(
        batch: WriteBatch, commit_index: int, stores: list[tuple[int, int]]
    ) -> None:
        """Record which stores the commit at ``commit_index`` made visible."""
        batch.put(b"t" + u64(commit_index), msgpack.packb([list(s) for s in stores]))

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
        """Record the applied index and the log clock in ``batch`` (the index resumes from
        here after a restart)."""
        batch.put(APPLIED_KEY, u64(applied))
        batch.put(TIME_KEY, u64(last_time))

    # -- topic metadata (versioned) --------------------------------------------------------
    @staticmethod
    def put_version(batch: WriteBatch, topic: str, index: int, state: TopicState | None) -> None:
        """Record the state of ``topic`` as of ``index`` (None: deleted) in ``batch``."""
        batch.put(_topic_prefix(b"v", topic) + u64(index), _pack_state(state))

    def versions(self, topic: str | None = None, after: bytes = b"") -> Iterator[Version]:
        """``(key, topic, index, state)`` of the version rows of ``topic`` (None: every
        topic) in key order -- by name, then index -- after key ``after``."""
        prefix = b"v" if topic is None else _topic_prefix(b"v", topic)
        lo, hi = max(prefix, after + b"\x00"), prefix[:-1] + bytes([prefix[-1] + 1])
        for key, value in self._db.items(lo, hi, "topic versions"):
            yield key, key[1:-9].decode(), int(_U64.unpack(key[-8:])[0]), _unpack_state(value)

    def topics_as_of(self, index: int | None = None) -> dict[str, TopicState]:
        """Every live topic after applying entries up to ``index`` (None: all versions)."""
        out: dict[str, TopicState] = {}
        for _, name, at, state in self.versions():
            if index is not None and at > index:
                continue
            if state is None:
                out.pop(name, None)
            else:
                out[name] = state
        return out

    # -- records ---------------------------------------------------------------------------
    def published_bytes(self, topic: str) -> int:
        """Bytes published to the topic's current incarnation (a running sum; see module):
        the sum in its last size key (one seek)."""
        prefix = _topic_prefix(b"b", topic)
        _, last = self._db.bounds(prefix, prefix[:-1] + _END, "topic size")
        return 0 if last is None else int(_U64.unpack_from(last, len(last) - 16)[0])

    @staticmethod
    def put_entry(
        batch: WriteBatch,
        index: int,
        time_ms: int,
        by_topic: dict[str, tuple[list[int], int]],
        published: dict[str, int],
    ) -> None:
        """Index one record entry: ``by_topic`` maps each topic to its positions and their
        total size; ``published`` holds (and is updated with) each topic's running sum."""
        stamp = u64(time_ms)
        for topic, (positions, size) in by_topic.items():
            before = published[topic]
            after = before + size
            published[topic] = after
            batch.put(entry_key(topic, index), _pack_entry(time_ms, before, positions))
            batch.put(_topic_prefix(b"b", topic) + u64(after) + u64(index), b"")
        batch.put(b"a" + stamp + u64(index), b"")
        batch.put(b"i" + u64(index), stamp)

    @staticmethod
    def delete_topic_records(batch: WriteBatch, topic: str) -> None:
        """Drop every record key of a topic (it was deleted, or re-created empty)."""
        for kind in (b"r", b"b"):
            prefix = _topic_prefix(kind, topic)
            batch.delete_range(prefix, prefix[:-1] + _END)

    def entries(self, topic: str, start_index: int) -> Iterator[EntryRecords]:
        """``topic``'s record entries from index ``start_index`` on, in log order."""
        prefix = _topic_prefix(b"r", topic)
        lo = entry_key(topic, start_index)
        for key, value in self._db.items(lo, prefix[:-1] + _END, "topic records"):
            yield _unpack_entry(_key_index(key), value)

    def entries_before(self, topic: str, end_index: int) -> Iterator[EntryRecords]:
        """``topic``'s record entries below index ``end_index``, newest first (one seek
        each: used to find a few entries at the end, never to scan)."""
        lo = _topic_prefix(b"r", topic)
        hi = entry_key(topic, end_index)
        while True:
            _, last = self._db.bounds(lo, hi, "topic records (newest first)")
            value = None if last is None else self._db.get(last, "topic records")
            if last is None or value is None:
                return
            yield _unpack_entry(_key_index(last), value)
            hi = last

    def record_counts(self, topic: str, lo: int, hi: int) -> Iterator[tuple[int, int]]:
        """``(entry index, records of topic)`` for ``topic``'s entries in ``[lo, hi]`` (one
        scan of its keys: the TC record counts, without reading entries)."""
        for key, value in self._db.items(entry_key(topic, lo), entry_key(topic, hi + 1), "counts"):
            runs = _RUN.iter_unpack(value[_ENTRY_HEAD.size :])
            yield _key_index(key), sum(count for _, count in runs)

    def record_entries(self, lo: int, hi: int) -> Iterator[int]:
        """Indexes of the record entries in ``[lo, hi]`` (the ``i`` keys), in order."""
        for key, _ in self._db.items(b"i" + u64(lo), b"i" + u64(hi + 1), "record entries"):
            yield int(_U64.unpack(key[1:])[0])

    def entry(self, topic: str, index: int) -> EntryRecords | None:
        """What the index holds for ``topic`` in entry ``index`` (None: nothing)."""
        value = self._db.get(entry_key(topic, index), "topic record entry")
        return None if value is None else _unpack_entry(index, value)

    def first_entry_past_bytes(self, topic: str, published: int) -> int | None:
        """Index of the topic's first entry whose running sum (after it) exceeds
        ``published`` (one seek), or None."""
        prefix = _topic_prefix(b"b", topic)
        first, _ = self._db.bounds(prefix + u64(published + 1), prefix[:-1] + _END, "sizes")
        return None if first is None else _key_index(first)

    # -- time ------------------------------------------------------------------------------
    def first_index_at(self, time_ms: int) -> int | None:
        """Index of the first record entry appended at or after ``time_ms`` (one seek), kept
        until the next write: topics sharing a retention ask the same (20,000 topics cost
        20,000 seeks a second, ~0.35 s of the loop)."""
        kept = self._first_at
        if kept is not None and kept[0] == time_ms:
            return kept[1]
        first, _ = self._db.bounds(b"a" + u64(time_ms), b"b", "time index")
        found = None if first is None else int(_U64.unpack(first[-8:])[0])
        self._first_at = (time_ms, found)
        return found

    def time_at(self, index: int) -> tuple[int, int] | None:
        """``(entry index, time)`` of the last record entry at or below ``index``."""
        _, last = self._db.bounds(b"i", b"i" + u64(index + 1), "entry times")
        if last is None:
            return None
        return int(_U64.unpack(last[1:])[0]), _read_u64(self._db.get(last, "entry time"))

    # -- housekeeping ----------------------------------------------------------------------
    def drop_topic_below(self, batch: WriteBatch, topic: str, floor: int) -> None:
        """Entries below index ``floor`` left the log (compaction): drop ``topic``'s keys of
        them, except its last entry below it (where its records ended: the low-water of a
        topic whose records all expired)."""
        kept = next(self.entries_before(topic, floor), None)
        if kept is not None:
            prefix, sizes = _topic_prefix(b"r", topic), _topic_prefix(b"b", topic)
            batch.delete_range(prefix, entry_key(topic, kept.index))
            # the size keys of every entry before ``kept``: its sum may equal ``kept``'s bytes
            # before it, so the bound takes the index too
            batch.delete_range(sizes, sizes + u64(kept.bytes_before) + u64(kept.index))

    def drop_shared_below(self, batch: WriteBatch, floor: int) -> None:
        """The commit, time and entry-time keys below ``floor``, except the last ``i`` key,
        which ``time_at`` still needs for snapshots."""
        batch.delete_range(b"t", b"t" + u64(floor))
        below = self.time_at(floor - 1)
        if below is not None:
            last_index, last_time = below
            batch.delete_range(b"a", b"a" + u64(last_time) + u64(last_index))
            batch.delete_range(b"i", b"i" + u64(last_index))

    # -- TTL deadlines ---------------------------------------------------------------------
    @staticmethod
    def put_ttl_deadline(batch: WriteBatch, due_ms: int, index: int) -> None:
        """A record of entry ``index`` expires by its TTL at log-clock time ``due_ms``."""
        batch.put(b"d" + u64(due_ms) + u64(index), b"")

    def next_ttl_deadline(self, after_ms: int) -> int | None:
        """The first TTL deadline later than ``after_ms`` (one seek; None: none)."""
        first, _ = self._db.bounds(b"d" + u64(after_ms + 1), b"e", "TTL deadlines")
        return None if first is None else int(_U64.unpack(first[1:9])[0])

    @staticmethod
    def drop_ttl_deadlines(batch: WriteBatch, upto_ms: int) -> None:
        """Forget the deadlines at or before ``upto_ms`` (passed: the log clock is there)."""
        batch.delete_range(b"d", b"d" + u64(upto_ms + 1))

    @staticmethod
    def clear(batch: WriteBatch) -> None:
        """Queue the removal of everything (a snapshot restore rebuilds the index)."""
        batch.delete_range(b"\x00", b"\xff")

    @staticmethod
    def put_base_time(batch: WriteBatch, time_ms: int) -> None:
        """The log clock a restored snapshot starts from: it stays monotonic across it."""
        batch.put(BASE_TIME_KEY, u64(time_ms))
