"""Log entries: the 20-byte header codec shared by the wire, the storage and the core.

Layout (docs/protocol.md §4.1)::

    offset 0   12 bytes  request id (all zero for CHECKPOINT)
    offset 12   1 byte   type: 0 STATE, 1 CONFIG, 2 CHECKPOINT
    offset 13   7 bytes  term, unsigned little-endian
    offset 20  >= 1 byte data

The log index is not part of the entry: it is implied by position. Every entry carries at least
one data byte, because a shorter entry makes a reference follower exit.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import IntEnum
from operator import attrgetter
from typing import Final

from raftlog import speedups
from raftlog.errors import EntryFormatError

REQUEST_ID_SIZE: Final = 12
ENTRY_HEADER_SIZE: Final = 20
MAX_ENTRY_TERM: Final = (1 << 56) - 1
"""Largest term the 7-byte header field can hold."""

ZERO_REQUEST_ID: Final = bytes(REQUEST_ID_SIZE)
"""The request id of CHECKPOINT entries; never cached for idempotency."""

CHECKPOINT_DATA: Final = b"\xc0"
"""A CHECKPOINT entry's data: the MessagePack nil byte."""


TIME_CHECKPOINT_TAG: Final = 0xCF
"""MessagePack uint64: the first byte of a time checkpoint's data."""

TIME_CHECKPOINT_SIZE: Final = 9
MAX_TIME_MS: Final = (1 << 64) - 1


def encode_time_checkpoint(time_ms: int) -> bytes:
    """The data of a CHECKPOINT entry that stamps cluster time ``time_ms`` (a *time
    checkpoint*, ``raftlog.cluster_clock``)."""
    if not 0 <= time_ms <= MAX_TIME_MS:
        raise ValueError(f"cluster time {time_ms} does not fit 64 bits")
    return bytes((TIME_CHECKPOINT_TAG,)) + time_ms.to_bytes(8, "big")


def decode_time_checkpoint(data: bytes) -> int | None:
    """The cluster time a CHECKPOINT entry's data stamps, or None (the reference's nil byte,
    or anything else: a CHECKPOINT that is not a time stamp moves no clock)."""
    if len(data) != TIME_CHECKPOINT_SIZE or data[0] != TIME_CHECKPOINT_TAG:
        return None
    return int.from_bytes(data[1:], "big")


class EntryType(IntEnum):
    """The entry type byte. The reference does not validate it on receipt, nor do we."""

    STATE = 0
    CONFIG = 1
    CHECKPOINT = 2


_STATE_BYTE: Final = bytes((EntryType.STATE,))


@dataclass(frozen=True, slots=True)
class LogEntry:
    """One log entry. ``entry_type`` is an ``int`` so that unknown type bytes round-trip."""

    request_id: bytes
    entry_type: int
    term: int
    data: bytes
    _raw: bytes | None = field(default=None, init=False, repr=False, compare=False)
    """The serialized form, once computed or parsed: an entry is written to the log, sent to
    every follower and applied, and each of those needs these bytes."""

    def __post_init__(self) -> None:
        if len(self.request_id) != REQUEST_ID_SIZE:
            raise EntryFormatError(f"request id must be {REQUEST_ID_SIZE} bytes")
        if not 0 <= self.entry_type <= 0xFF:
            raise EntryFormatError(f"entry type {self.entry_type} does not fit in one byte")
        if not 0 <= self.term <= MAX_ENTRY_TERM:
            raise EntryFormatError(f"term {self.term} does not fit in 7 bytes")
        if not self.data:
            raise EntryFormatError("entry data must hold at least one byte")

    @classmethod
    def checkpoint(cls, term: int) -> LogEntry:
        """The entry a new leader appends to commit entries of earlier terms (§12.2)."""
        return cls(ZERO_REQUEST_ID, EntryType.CHECKPOINT, term, CHECKPOINT_DATA)

    def to_bytes(self) -> bytes:
        """Serialize to the wire/storage layout (computed once per entry)."""
        raw = self._raw
        if raw is None:
            raw = b"".join(
                (
                    self.request_id,
                    bytes((self.entry_type,)),
                    self.term.to_bytes(7, "little"),
                    self.data,
                )
            )
            object.__setattr__(self, "_raw", raw)
        return raw

    @classmethod
    def states(cls, term: int, items: Sequence[tuple[bytes, bytes]]) -> list[LogEntry]:
        """A new STATE entry of each ``(request_id, data)``, as ``LogEntry(request_id,
        EntryType.STATE, term, data)`` with the same checks, serialized at once: the leader
        builds a proposal batch's entries this way and needs their bytes for the write, every
        follower and the apply (issue #28: the generated frozen ``__init__`` plus a later
        ``to_bytes`` cost twice as much; the term's check and bytes are done once)."""
        if not 0 <= term <= MAX_ENTRY_TERM:
            raise EntryFormatError(f"term {term} does not fit in 7 bytes")
        header_tail = _STATE_BYTE + term.to_bytes(7, "little")
        new = object.__new__
        init = object.__setattr__
        entries: list[LogEntry] = []
        for request_id, data in items:
            if len(request_id) != REQUEST_ID_SIZE:
                raise EntryFormatError(f"request id must be {REQUEST_ID_SIZE} bytes")
            if not data:
                raise EntryFormatError("entry data must hold at least one byte")
            entry: LogEntry = new(cls)
            init(entry, "request_id", request_id)
            init(entry, "entry_type", EntryType.STATE)
            init(entry, "term", term)
            init(entry, "data", data)
            init(entry, "_raw", request_id + header_tail + data)
            entries.append(entry)
        return entries

    @classmethod
    def from_bytes(cls, raw: bytes) -> LogEntry:
        """Parse the wire/storage layout; raises ``EntryFormatError`` on malformed input.

        The hot path of every follower (one call per replicated entry) and of every log read,
        so it skips the generated ``__init__``: once the length is checked, the layout itself
        guarantees what ``__post_init__`` checks (a 12-byte id, a one-byte type, a 7-byte
        term, at least one data byte)."""
        if len(raw) <= ENTRY_HEADER_SIZE:
            raise EntryFormatError(
                f"entry of {len(raw)} bytes is too short (header is {ENTRY_HEADER_SIZE} bytes "
                "and data must hold at least one byte)"
            )
        raw = bytes(raw)
        entry: LogEntry = object.__new__(cls)
        init = object.__setattr__
        init(entry, "request_id", raw[:REQUEST_ID_SIZE])
        init(entry, "entry_type", raw[REQUEST_ID_SIZE])
        init(entry, "term", int.from_bytes(raw[13:ENTRY_HEADER_SIZE], "little"))
        init(entry, "data", raw[ENTRY_HEADER_SIZE:])
        init(entry, "_raw", raw)
        return entry

    @property
    def is_state(self) -> bool:
        return self.entry_type == EntryType.STATE

    @property
    def is_config(self) -> bool:
        return self.entry_type == EntryType.CONFIG

    @property
    def is_checkpoint(self) -> bool:
        return self.entry_type == EntryType.CHECKPOINT

    @property
    def size(self) -> int:
        """Serialized size in bytes (what batching limits count)."""
        return ENTRY_HEADER_SIZE + len(self.data)


def parse_entries_py(frames: Sequence[bytes]) -> tuple[LogEntry, ...]:
    """``LogEntry.from_bytes`` of each frame (the pure-Python twin and definition of
    ``parse_entries``: ``raftlog.speedups``)."""
    return tuple(map(LogEntry.from_bytes, frames))


def entries_bytes_py(entries: Sequence[LogEntry]) -> list[bytes]:
    """``entry.to_bytes()`` of each entry (the pure-Python twin and definition of
    ``entries_bytes``). Why a function: a leader serializes every entry it appends once per
    follower it sends it to and once more to apply it; the compiled twin reads each entry's
    cached bytes without a Python call per entry (issue #28)."""
    return [entry.to_bytes() for entry in entries]


if speedups.records is None:
    parse_entries = parse_entries_py
    entries_bytes = entries_bytes_py
else:
    _parse_entries_c = speedups.records.parse_entries
    entries_bytes = speedups.records.entries_bytes

    def parse_entries(frames: Sequence[bytes]) -> tuple[LogEntry, ...]:
        """``parse_entries_py``, compiled: every entry a follower or a reader receives."""
        return _parse_entries_c(LogEntry, frames, EntryFormatError)


_DATA: Final = attrgetter("data")


def entries_size(entries: Sequence[LogEntry]) -> int:
    """``sum(entry.size for entry in entries)`` without a Python call per entry: the core
    sums batches of entries several times per committed entry (replication budgets, the
    recent-entries window)."""
    return ENTRY_HEADER_SIZE * len(entries) + sum(map(len, map(_DATA, entries)))
