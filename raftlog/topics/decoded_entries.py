"""The log entries the topics machine decoded last, kept for the next read of them.

Why: the readers of a live topic all read its newest entries. A thousand long polls or
consumers woken by one record each read that record's entry; reading one costs its size in
copies and checksums and decoding (a 6 MiB entry: ~6 ms on a quiet machine, ~30 ms of the
loop's CPU under load). 160 REST long polls woken by one 6 MiB record spent seconds of the
peer's loop on the same entry and stalled it past a second on a busy 2-core machine
(``tests/faults/test_rest_woken_polls.py``); kept here, it is read and decoded once.

Why it is safe: the machine reads only entries it applied (its index points at nothing
else), and an applied entry is committed, so what its index holds never changes on any peer
(Raft's log matching). An entry below the log's first index (compacted away) is never
answered from here, and a snapshot restore forgets everything (``forget``).

Bounded by what the entries kept weigh (``KEPT_BYTES``: their raw bytes plus
``RECORD_COST`` per record -- a decoded record is a Python object of 160-430 bytes however
small its raw form, so an entry of 16,384 empty records weighs 6.5 MB, not its 130 KB; a
heavier entry is not kept) and by their number (``KEPT_ENTRIES``); the least recently read
goes first.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from typing import Final, Protocol

from raftlog.entry import ENTRY_HEADER_SIZE
from raftlog.topics.records import RecordFormatError

KEPT_BYTES: Final = 32 * 1024 * 1024
"""What the entries kept weigh at most: three entries of a few large records at the default
10 MiB limit, or a few of the many-record ones a scan walks through -- a bounded part of a
peer's memory."""
RECORD_COST: Final = 400
"""Bytes counted per decoded record beside the entry's raw bytes (measured: 160 for an
empty record, 430 with a key and a header)."""
KEPT_ENTRIES: Final = 256
"""Entries kept at most (small entries cost little to decode again; the bookkeeping of
many would not pay)."""


class RawEntries(Protocol):
    """The part of the peer's LogStore this reads (``retention.EntrySource`` has it)."""

    @property
    def first_index(self) -> int:
        """The first index readable as an entry."""
        ...

    def raw_entries(self, lo: int, hi: int, max_bytes: int | None = None) -> list[bytes]:
        """Serialized entries ``[lo, hi)``."""
        ...


class DecodedEntries:
    """Entry index -> its decoded topic entry (module docstring). One per topics machine,
    used from the peer's loop thread only."""

    def __init__(
        self,
        entries: RawEntries,
        decode: Callable[[bytes], object],
        *,
        kept_bytes: int = KEPT_BYTES,
        kept_entries: int = KEPT_ENTRIES,
    ) -> None:
        self._entries = entries
        self._decode = decode
        self._kept_bytes = kept_bytes
        self._kept_entries = kept_entries
        self._kept: OrderedDict[int, tuple[int, object]] = OrderedDict()
        self._bytes = 0
        self.reads = 0
        """Entries read from the log and decoded (a kept one is not read again)."""

    def get(self, index: int) -> object:
        """The decoded entry at ``index``: None when the log no longer has it (compacted
        meanwhile) or it is not a topic entry -- never an error (the index may point at an
        entry compaction just removed)."""
        if index < self._entries.first_index:
            self._drop_below(self._entries.first_index)
            return None
        kept = self._kept.get(index)
        if kept is not None:
            self._kept.move_to_end(index)
            return kept[1]
        try:
            raw = self._entries.raw_entries(index, index + 1)[0]
            self.reads += 1
            entry = self._decode(raw[ENTRY_HEADER_SIZE:])
        except (IndexError, RecordFormatError):
            return None
        if entry is not None:
            self.offer(index, len(raw), entry)
        return entry

    def offer(self, index: int, size: int, entry: object) -> None:
        """Keep ``entry``, just decoded from the ``size`` bytes of entry ``index`` by its
        apply (a transaction's store: its commit reads it again, all of it, in the same
        loop pass that applies the commit -- 0.3 s for 100,000 records decoded twice)."""
        records = getattr(entry, "records", None)
        weight = size + RECORD_COST * (len(records) if isinstance(records, tuple) else 0)
        if weight <= self._kept_bytes and index >= self._entries.first_index:
            self._keep(index, weight, entry)

    def forget(self) -> None:
        """Keep nothing (the log below was replaced: a snapshot was restored)."""
        self._kept.clear()
        self._bytes = 0

    def _keep(self, index: int, size: int, entry: object) -> None:
        old = self._kept.pop(index, None)
        if old is not None:
            self._bytes -= old[0]
        self._kept[index] = (size, entry)
        self._bytes += size
        while self._bytes > self._kept_bytes or len(self._kept) > self._kept_entries:
            _, (gone, _entry) = self._kept.popitem(last=False)
            self._bytes -= gone

    def _drop_below(self, first: int) -> None:
        for index in [i for i in self._kept if i < first]:
            self._bytes -= self._kept.pop(index)[0]
