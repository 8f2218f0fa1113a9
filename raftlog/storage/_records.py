"""On-disk layout of the RocksDB store: keys, checksummed records, and error mapping.

One RocksDB database per peer, keys grouped by a one-byte prefix (sorted, so each group is a
contiguous key range); the entries live in the default family, every other group in a
column family of its own (``FAMILY_RANGES``)::

    b"e" + index (8 bytes BE)   entry record: CRC32 (4 bytes BE) + entry bytes
                                (layout: docs/protocol.md §4.1)
    b"m/hard"                   hard state: CRC32 + MessagePack map
    b"m/log"                    log meta: CRC32 + version, snapshot index/term, last index
    b"r" + request id (12)      index (8 bytes BE) of the entry carrying that id
    b"x" + index (8 bytes BE)   request id of that entry (oldest-first walk for pruning)

Big-endian indexes make key order equal index order, so ranges are plain iterator bounds. Every
CRC covers the key as well as the value, so a record that ends up under the wrong key (or a
stale value) fails its check like a flipped bit does.

Why the column families (issue #28): RocksDB flushes its memtable into one table file, so with
all groups in one family every flushed file spans ``e`` to ``x``, overlaps every other level-0
file and all of level 1, and each compaction rewrites most of the store: ~9 µs of CPU per
entry under steady load (docs/performance.md §3). In families of their own each group's files
hold consecutive keys. The two ``m/`` records are rewritten by every append, so beside the
entries they put a key above every entry into each flushed file, and no entry file could be
moved down a level without being rewritten: every entry's bytes were read, decompressed and
written again by each compaction (with 256 KiB entries three times the CPU of the flushes
themselves). In their own family the entries' files follow each other and move down whole.
One write batch still spans the families and one WAL carries it, so a synced append stays one
atomic fsync. The keys and values are byte for byte what they were in the single family, so
an older store is upgraded by moving its records (``RocksDatabase``).
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Final

import msgpack
from rocksdict import ColumnFamily, WriteBatch

from raftlog import speedups
from raftlog.entry import ENTRY_HEADER_SIZE, ZERO_REQUEST_ID, LogEntry
from raftlog.errors import EntryFormatError, StorageCorruptionError, StorageError
from raftlog.rpc.messages import ConfigPayload, Peer
from raftlog.storage._rocksdb_options import DEFAULT_FAMILY
from raftlog.storage.base import HardState

ENTRY_PREFIX: Final = b"e"
ENTRY_END: Final = b"f"
REQUEST_PREFIX: Final = b"r"
REQUEST_END: Final = b"s"
REQUEST_BY_INDEX_PREFIX: Final = b"x"
REQUEST_BY_INDEX_END: Final = b"y"
REQUEST_FAMILY: Final = "request_ids"
"""The column family of the ``r`` records."""
MIRROR_FAMILY: Final = "request_ids_by_index"
"""The column family of the ``x`` records."""
META_PREFIX: Final = b"m"
META_END: Final = b"n"
META_FAMILY: Final = "meta"
"""The column family of the ``m/`` records: the log's bounds and the hard state."""
FAMILY_RANGES: Final = {
    META_FAMILY: (META_PREFIX, META_END),
    REQUEST_FAMILY: (REQUEST_PREFIX, REQUEST_END),
    MIRROR_FAMILY: (REQUEST_BY_INDEX_PREFIX, REQUEST_BY_INDEX_END),
}
"""Each column family's key range, in key order (a whole-store scan reads them in this order)."""
UNFILTERED_FAMILIES: Final = frozenset({DEFAULT_FAMILY, MIRROR_FAMILY})
"""The families read only in ranges and by keys they hold -- the entries (the default
family) and the by-index mirrors -- whose table files need no bloom filter (memory,
``_rocksdb_options.database_options``)."""
META_KEY: Final = b"m/log"
HARD_STATE_KEY: Final = b"m/hard"

CRC_SIZE: Final = 4
_ENTRY_PREFIX_CRC: Final = zlib.crc32(ENTRY_PREFIX)
_REQUEST_PREFIX_CRC: Final = zlib.crc32(REQUEST_PREFIX)
_BY_INDEX_PREFIX_CRC: Final = zlib.crc32(REQUEST_BY_INDEX_PREFIX)
_META_FORMAT: Final = struct.Struct(">BQQQ")
_META_VERSION: Final = 1


def entry_key(index: int) -> bytes:
    """The key of the entry at ``index`` (big-endian, so keys sort in log order)."""
    return ENTRY_PREFIX + index.to_bytes(8, "big")


def request_key(request_id: bytes) -> bytes:
    """The key of a request id's record (request id -> log index), for at-most-once appends."""
    return REQUEST_PREFIX + request_id


def request_by_index_key(index: int) -> bytes:
    """The key of the index -> request id record, so pruning and truncation find the ids."""
    return REQUEST_BY_INDEX_PREFIX + index.to_bytes(8, "big")


def key_index(key: bytes) -> int:
    """The index encoded in an ``e``/``x`` key."""
    return int.from_bytes(key[1:9], "big")


def _crc(key: bytes, body: bytes) -> bytes:
    return zlib.crc32(body, zlib.crc32(key)).to_bytes(CRC_SIZE, "big")


def seal(key: bytes, body: bytes) -> bytes:
    """The stored value: ``body`` prefixed with a CRC32 over key and body."""
    return _crc(key, body) + body


def unseal(key: bytes, value: bytes, what: str) -> bytes:
    """``body`` of a sealed value; ``StorageCorruptionError`` naming ``what`` if it fails."""
    body = value[CRC_SIZE:]
    if len(value) < CRC_SIZE or value[:CRC_SIZE] != _crc(key, body):
        raise StorageCorruptionError(f"{what}: checksum mismatch ({len(value)} bytes stored)")
    return body


def put_entries_py(
    batch: WriteBatch,
    first_index: int,
    entries: Sequence[LogEntry],
    mirrors: ColumnFamily | None = None,
    requests: ColumnFamily | None = None,
) -> None:
    """Queue the sealed records of ``entries`` (from ``first_index``) and of their request ids
    (the pure-Python twin and definition of ``put_entries``: ``raftlog.speedups``).
    ``mirrors`` and ``requests`` are the column families of the ``x`` and ``r`` records
    (``RocksDatabase.family``; None: the default family), passed to each ``put``.

    The hot loop of every append, so it is written out by hand: the same records as
    ``seal(entry_key(i), ...)`` etc., using CRC32's streaming property to checksum key and
    value without concatenating them first.

    The records go in three runs, each in entry order: the entries, then the by-index
    mirrors, then the request ids. RocksDB inserts a batch into its memtable (a skip list) in
    the batch's order and reuses the last insert's position for the next: keys that follow
    each other in key order are cheap, a jump is a full search. Interleaved (entry, id,
    mirror, entry, ...), every insert jumped: 4.8-5.1 µs per entry in the write, against
    3.4-3.6 µs in runs (docs/performance.md §3). Within the ids' run a later entry with the
    same id still comes later, so it still takes over the mapping.
    """
    put = batch.put
    crc32 = zlib.crc32
    zero = ZERO_REQUEST_ID
    indexed: list[tuple[bytes, bytes]] = []
    for index, entry in enumerate(entries, start=first_index):
        packed_index = index.to_bytes(8, "big")
        payload = entry.to_bytes()
        put(
            ENTRY_PREFIX + packed_index,
            crc32(payload, crc32(packed_index, _ENTRY_PREFIX_CRC)).to_bytes(4, "big") + payload,
        )
        if entry.request_id != zero:
            indexed.append((packed_index, entry.request_id))
    for packed_index, request_id in indexed:
        put(
            REQUEST_BY_INDEX_PREFIX + packed_index,
            crc32(request_id, crc32(packed_index, _BY_INDEX_PREFIX_CRC)).to_bytes(4, "big")
            + request_id,
            mirrors,
        )
    for packed_index, request_id in indexed:
        put(
            REQUEST_PREFIX + request_id,
            crc32(packed_index, crc32(request_id, _REQUEST_PREFIX_CRC)).to_bytes(4, "big")
            + packed_index,
            requests,
        )


def entry_payload(index: int, value: bytes | None) -> bytes:
    """Verified serialized entry bytes stored for ``index`` (``None``: the record is missing)."""
    if value is None:
        raise StorageCorruptionError(f"entry {index}: record missing inside the log range")
    body = unseal(entry_key(index), value, f"entry {index}")
    if len(body) <= ENTRY_HEADER_SIZE:
        raise StorageCorruptionError(f"entry {index}: record of {len(body)} bytes is too short")
    return body


def take_payloads_py(
    values: Iterator[bytes], first_index: int, max_bytes: int | None
) -> tuple[list[bytes], bool]:
    """(The pure-Python twin and definition of ``take_payloads``: ``raftlog.speedups``.)
    Verified entry bodies from consecutive stored values starting at ``first_index``,
    stopping before the entry that would pass ``max_bytes`` (at least one is taken); the flag
    says whether that limit is what stopped it (else the values ran out).

    The hot loop of every range read (RequestEntries, replication), written out like
    ``put_entries``: the same checks as ``entry_payload`` without a call per entry."""
    crc32 = zlib.crc32
    out: list[bytes] = []
    total = 0
    index = first_index
    for value in values:
        body = value[CRC_SIZE:]
        stored = value[:CRC_SIZE]
        if (
            stored
            != crc32(body, crc32(index.to_bytes(8, "big"), _ENTRY_PREFIX_CRC)).to_bytes(4, "big")
            or len(body) <= ENTRY_HEADER_SIZE
        ):
            entry_payload(index, value)  # raises the precise error
        total += len(body)
        if max_bytes is not None and total > max_bytes and out:
            return out, True
        out.append(body)
        index += 1
    return out, False


if speedups.records is None:
    put_entries = put_entries_py
    take_payloads = take_payloads_py
else:
    _put_entries_c = speedups.records.put_entries
    _take_payloads_c = speedups.records.take_payloads

    def put_entries(
        batch: WriteBatch,
        first_index: int,
        entries: Sequence[LogEntry],
        mirrors: ColumnFamily | None = None,
        requests: ColumnFamily | None = None,
    ) -> None:
        """``put_entries_py``, compiled (``raftlog._speedups_records``)."""
        _put_entries_c(batch.put, first_index, entries, mirrors, requests)

    def take_payloads(
        values: Iterator[bytes], first_index: int, max_bytes: int | None
    ) -> tuple[list[bytes], bool]:
        """``take_payloads_py``, compiled; a bad record still raises ``entry_payload``'s
        precise error."""
        return _take_payloads_c(values, first_index, max_bytes, entry_payload)


def decode_entry(index: int, value: bytes | None) -> LogEntry:
    """The log entry stored at ``index``; a damaged record is a ``StorageError`` naming the
    index."""
    payload = entry_payload(index, value)
    try:
        return LogEntry.from_bytes(payload)
    except EntryFormatError as exc:  # unreachable unless the checksum collided
        raise StorageCorruptionError(f"entry {index}: {exc}") from exc


def entry_term(payload: bytes) -> int:
    """Term from serialized entry bytes without building a ``LogEntry``."""
    return int.from_bytes(payload[13:ENTRY_HEADER_SIZE], "little")


def encode_meta(snapshot_index: int, snapshot_term: int, last_index: int) -> bytes:
    """The sealed meta record (snapshot index and term, last index): the log's bounds after a
    restart."""
    body = _META_FORMAT.pack(_META_VERSION, snapshot_index, snapshot_term, last_index)
    return seal(META_KEY, body)


def put_in_meta_family(
    batch: WriteBatch, family: Callable[[str], ColumnFamily | None], key: bytes, value: bytes
) -> None:
    """Queue one of the ``m/`` records (the log's bounds, the hard state) into ``batch``, in
    the family ``family(META_FAMILY)`` names (the database's ``family``: None in a database
    opened without families, the layout before them, where the records lived in the default
    family)."""
    batch.put(key, value, family(META_FAMILY))


def put_meta(
    batch: WriteBatch,
    family: Callable[[str], ColumnFamily | None],
    snapshot_index: int,
    snapshot_term: int,
    last_index: int,
) -> None:
    """Queue the meta record (``put_in_meta_family``)."""
    put_in_meta_family(
        batch, family, META_KEY, encode_meta(snapshot_index, snapshot_term, last_index)
    )


def decode_meta(value: bytes) -> tuple[int, int, int]:
    """``(snapshot_index, snapshot_term, last_index)`` from the stored log meta."""
    body = unseal(META_KEY, value, "log meta")
    if len(body) != _META_FORMAT.size or body[0] != _META_VERSION:
        raise StorageCorruptionError(f"log meta: unknown format ({len(body)} bytes)")
    _version, snapshot_index, snapshot_term, last_index = _META_FORMAT.unpack(body)
    if last_index < snapshot_index:
        raise StorageCorruptionError(
            f"log meta: last index {last_index} below snapshot index {snapshot_index}"
        )
    return snapshot_index, snapshot_term, last_index


def _peers(peers: tuple[Peer, ...] | None) -> list[list[str]] | None:
    return None if peers is None else [[p.id, p.url] for p in peers]


_PACK: Final = msgpack.Packer(use_bin_type=True).pack
_LAST_APPLIED_KEY: Final = _PACK("last_applied")
_head_cache: list[tuple[Any, bytes]] = [(None, b"")]
"""The last (term, vote, config, config_index) encoded and its bytes, as one tuple (read
once per call, so a thread never pairs one head with another's bytes)."""


def encode_hard_state(state: HardState) -> bytes:
    """The sealed MessagePack map ``{term, vote, config, config_index, last_applied}``.

    Every applied batch rewrites the record with a new ``last_applied`` only, so the map's
    first four pairs are kept from the last call (the same bytes ``packb`` gives for the
    whole map: a fixmap header, the pairs in order)."""
    head = (state.current_term, state.voted_for, state.config, state.config_index)
    cached = _head_cache[0]
    if cached[0] != head:
        config = state.config
        first_four = msgpack.packb(
            {
                "term": state.current_term,
                "vote": state.voted_for,
                "config": None
                if config is None
                else {"new": _peers(config.new), "old": _peers(config.old)},
                "config_index": state.config_index,
            },
            use_bin_type=True,
        )
        cached = _head_cache[0] = (head, b"\x85" + first_four[1:] + _LAST_APPLIED_KEY)
    return seal(HARD_STATE_KEY, cached[1] + _PACK(state.last_applied))


def decode_hard_state(value: bytes) -> HardState:
    """The sealed hard-state record; damage is a ``StorageError``, never a silent default."""
    body = unseal(HARD_STATE_KEY, value, "hard state")
    try:
        raw: dict[str, Any] = msgpack.unpackb(body, raw=False)
        config = raw["config"]
        payload = None
        if config is not None:
            old = config["old"]
            payload = ConfigPayload(
                tuple(Peer(i, u) for i, u in config["new"]),
                None if old is None else tuple(Peer(i, u) for i, u in old),
            )
        return HardState(
            current_term=int(raw["term"]),
            voted_for=raw["vote"],
            config=payload,
            config_index=int(raw["config_index"]),
            last_applied=int(raw["last_applied"]),
        )
    except (ValueError, KeyError, TypeError) as exc:
        raise StorageCorruptionError(f"hard state: undecodable ({exc})") from exc


def rocks_error(exc: Exception, what: str) -> StorageError:
    """Map an exception raised by RocksDB to our tree: ``Corruption: ...`` statuses become
    ``StorageCorruptionError``, everything else (``IO error: No space left``...) ``StorageError``.
    """
    message = str(exc) or type(exc).__name__
    if message.startswith("Corruption"):
        return StorageCorruptionError(f"{what}: {message}")
    return StorageError(f"{what}: {message}")
