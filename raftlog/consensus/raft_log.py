"""``RaftLog``: the core's view of the log -- the stable ``LogStore`` plus what is not durable.

The core never writes the store. Changes accumulate here and leave through ``Ready.append``
(and ``Ready.snapshot_ops``); ``stable_to``/``snapshot_persisted`` are called by
``advance()`` once the driver has made them durable.

View invariants (index ``i``):

* ``snapshot_index < first_index == snapshot_index + 1 <= unstable_first <= last_index + 1``.
* ``i >= unstable_first`` is read from ``_unstable``; ``first_index <= i < unstable_first`` from
  the store (the store may hold more entries at or after ``unstable_first``: they are being
  truncated and are invisible).
* ``unstable_first <= _in_progress_next <= last_index + 1``: entries below ``_in_progress_next``
  were handed to the driver in a ``LogAppend`` (``take_append``) that is not durable yet --
  several writes may be in flight at once (a storage thread), and they complete in order.
* ``_written_last`` is the store's last index once every write handed out so far is done: a
  write is pending whenever unstable entries at or after ``_in_progress_next`` exist or
  ``_in_progress_next <= _written_last`` (a truncation the store has not been told of).
* A pending snapshot install ``_snapshot = (index, term)`` hides everything at or below
  ``index`` until it is persisted.

Everything below ``unstable_first`` is durable, so ``persisted_last_index`` is what a leader may
count as its own acknowledgement.
"""

from __future__ import annotations

from collections.abc import Sequence
from operator import attrgetter, is_
from typing import Final

from raftlog.consensus.ready import LogAppend
from raftlog.entry import ZERO_REQUEST_ID, LogEntry, entries_size
from raftlog.storage.base import LogStore

_REQUEST_ID: Final = attrgetter("request_id")

RECENT_ENTRIES = 16384
RECENT_BYTES = 8 << 20
"""Bounds of the in-memory window of recently persisted entries."""


class RaftLog:
    """Stable log + unstable tail + pending snapshot install, read as one log."""

    def __init__(self, store: LogStore) -> None:
        self.store = store
        last = store.last_index
        self._unstable_first = last + 1
        self._unstable: list[LogEntry] = []
        self._unstable_ids: dict[bytes, int] = {}
        self._in_progress_next = last + 1
        self._written_last = last
        self._snapshot: tuple[int, int] | None = None
        # Entries made durable most recently, still in memory: a leader sends them to its
        # followers right after its own fsync, and reading them back from the store (and
        # decoding them again) cost a third of a busy leader's time. Invariant: they equal
        # the store's entries [_recent_first, _recent_first + len(_recent)), all below
        # _unstable_first.
        self._recent: list[LogEntry] = []
        self._recent_first = last + 1
        self._recent_bytes = 0

    # -- reads --------------------------------------------------------------------------
    @property
    def snapshot_index(self) -> int:
        """Index the snapshot covers, including a snapshot being installed."""
        snap = self._snapshot
        return snap[0] if snap is not None else self.store.snapshot_index

    @property
    def snapshot_term(self) -> int:
        """Term at ``snapshot_index``."""
        snap = self._snapshot
        return snap[1] if snap is not None else self.store.snapshot_term

    @property
    def first_index(self) -> int:
        """The first index still in the log."""
        return self.snapshot_index + 1

    @property
    def last_index(self) -> int:
        """The last index, including unstable entries not yet written."""
        return self._unstable_first + len(self._unstable) - 1

    @property
    def last_term(self) -> int:
        """The term of the last entry (unstable ones included)."""
        if self._unstable:
            return self._unstable[-1].term
        term = self.term_at(self._unstable_first - 1)
        if term is None:  # pragma: no cover - guarded by the view invariants
            raise AssertionError("last entry of the log view has no term")
        return term

    @property
    def persisted_last_index(self) -> int:
        """Last index known durable (valid for a leader, which never installs snapshots)."""
        return self._unstable_first - 1

    def term_at(self, index: int) -> int | None:
        """Term at ``index``: 0 for index 0 (when nothing is compacted), the snapshot term at
        ``snapshot_index``, None below it or beyond ``last_index``."""
        first_unstable = self._unstable_first
        if index >= first_unstable:
            offset = index - first_unstable
            return self._unstable[offset].term if offset < len(self._unstable) else None
        snap = self._snapshot
        if snap is not None and index <= snap[0]:
            return snap[1] if index == snap[0] else None
        offset = index - self._recent_first
        if 0 <= offset < len(self._recent):
            return self._recent[offset].term
        return self.store.term_at(index)

    def entries(self, lo: int, hi: int, max_bytes: int | None = None) -> list[LogEntry]:
        """Entries ``[lo, hi)``; with ``max_bytes`` at least one entry and then only while the
        total stays within the budget. Raises ``IndexError`` outside the view."""
        if lo >= hi:
            return []
        if lo < self.first_index or hi > self.last_index + 1:
            raise IndexError(
                f"entries [{lo}, {hi}) outside [{self.first_index}, {self.last_index + 1})"
            )
        first_unstable = self._unstable_first
        result: list[LogEntry] = []
        used = 0
        if lo < first_unstable:
            stable_hi = min(hi, first_unstable)
            result = self._stable_entries(lo, stable_hi, max_bytes)
            if hi <= first_unstable or len(result) < stable_hi - lo:
                return result
            if max_bytes is not None:
                used = entries_size(result)
        start = max(lo, first_unstable) - first_unstable
        stop = hi - first_unstable
        window = self._unstable[start:stop]
        if max_bytes is None or used + entries_size(window) <= max_bytes:
            result.extend(window)  # the common case: all of it fits
            return result
        for entry in window:
            used += entry.size
            if used > max_bytes and result:
                break
            result.append(entry)
        return result

    def _stable_entries(self, lo: int, hi: int, max_bytes: int | None) -> list[LogEntry]:
        recent_first = self._recent_first
        if lo < recent_first or hi > recent_first + len(self._recent):
            return self.store.entries(lo, hi, max_bytes)
        window = self._recent[lo - recent_first : hi - recent_first]
        if max_bytes is None or entries_size(window) <= max_bytes:
            return window
        out: list[LogEntry] = []
        used = 0
        for entry in window:
            used += entry.size
            if used > max_bytes and out:
                break
            out.append(entry)
        return out

    def index_of_request(self, request_id: bytes) -> int | None:
        """Index of the entry carrying ``request_id`` in this view (unstable tail first)."""
        return self.indexes_of_requests((request_id,))[0]

    def indexes_of_requests(self, request_ids: Sequence[bytes]) -> list[int | None]:
        """``index_of_request`` of each id, in order: the unstable tail first, then one store
        lookup for the rest (a proposal batch, issue #28); never an id in a stable suffix that
        is being truncated."""
        tail = self._unstable_ids
        found = [tail.get(request_id) for request_id in request_ids]
        missing = [i for i, index in enumerate(found) if index is None]
        if missing:
            stored = self.store.indexes_of_requests([request_ids[i] for i in missing])
            first_unstable = self._unstable_first
            for i, index in zip(missing, stored, strict=True):
                if index is not None and index < first_unstable:  # else: being truncated
                    found[i] = index
        return found

    # -- changes ------------------------------------------------------------------------
    def append(self, entries: Sequence[LogEntry]) -> int:
        """Append at the end; returns the new last index."""
        self._extend(entries)
        return self.last_index

    def truncate_and_append(self, first_index: int, entries: Sequence[LogEntry]) -> None:
        """Drop every entry at or after ``first_index`` (``first_index <= last_index + 1``),
        then append ``entries`` there."""
        if not self.first_index <= first_index <= self.last_index + 1:
            raise IndexError(f"append at {first_index} outside the log view")
        first_unstable = self._unstable_first
        if first_index >= first_unstable:
            self._drop_unstable_from(first_index - first_unstable)
        else:
            self._drop_unstable_from(0)
            self._unstable_first = first_index
            self._forget_recent_from(first_index)
        # a write in flight may still carry the dropped entries: the next one truncates them
        self._in_progress_next = min(self._in_progress_next, first_index)
        self._extend(entries)

    def install_snapshot(self, index: int, term: int) -> bool:
        """Make the snapshot ``(index, term)`` the base of the view (docs/protocol.md §12.6).

        Returns True when the log holds ``index`` with ``term``: the entries after it are kept.
        Otherwise the whole log is discarded and restarts at ``index + 1``."""
        kept = index <= self.last_index and self.term_at(index) == term
        first_unstable = self._unstable_first
        if kept and index >= first_unstable:
            count = index - first_unstable + 1
            for position in range(count):
                self._forget_id(self._unstable[position], first_unstable + position)
            del self._unstable[:count]
            self._unstable_first = index + 1
            self._in_progress_next = max(self._in_progress_next, index + 1)
        elif not kept:
            self._drop_unstable_from(0)
            self._unstable_first = index + 1
            self._in_progress_next = index + 1
        self._snapshot = (index, term)
        self._recent, self._recent_first, self._recent_bytes = [], index + 1, 0
        return kept

    # -- persistence bookkeeping --------------------------------------------------------
    def has_pending_append(self) -> bool:
        """Whether unstable entries wait to be handed out in a Ready or written."""
        start = self._in_progress_next
        return start - self._unstable_first < len(self._unstable) or start <= self._written_last

    def pending_append(self) -> LogAppend | None:
        """The write the next ``Ready.append`` will carry, if any (read-only)."""
        start = self._in_progress_next
        offset = start - self._unstable_first
        if offset < len(self._unstable) or start <= self._written_last:
            return LogAppend(start, tuple(self._unstable[offset:]))
        return None

    def take_append(self) -> LogAppend | None:
        """``pending_append``, now handed to the driver: it is in flight until ``stable_to``
        (the next one starts after it, unless a truncation reaches back into it)."""
        append = self.pending_append()
        if append is not None:
            self._in_progress_next = self.last_index + 1
            self._written_last = self.last_index
        return append

    def stable_to(self, written: LogAppend) -> None:
        """``written`` is durable: drop the prefix of the tail that it made stable. Writes
        complete in the order they were taken; an entry replaced since (a truncation) is not
        the one written, so the identity check stops there."""
        first = written.first_index
        entries = written.entries
        if self._unstable_first != first:
            return  # truncated below ``first`` since: a later write rewrites that range
        unstable = self._unstable
        limit = min(len(entries), len(unstable))
        if all(map(is_, unstable, entries)):  # the usual case, without a Python step per entry
            count = limit
        else:
            count = 0
            while count < limit and unstable[count] is entries[count]:
                count += 1
        if not count:
            return
        if count == len(unstable):
            self._unstable_ids.clear()  # it only ever maps ids of unstable entries
        else:
            for position in range(count):
                self._forget_id(unstable[position], first + position)
        self._remember(first, unstable[:count])
        del unstable[:count]
        self._unstable_first = first + count
        self._in_progress_next = max(self._in_progress_next, self._unstable_first)

    def snapshot_persisted(self, index: int, term: int) -> None:
        """The driver installed snapshot ``(index, term)`` and compacted the store."""
        if self._snapshot == (index, term):
            self._snapshot = None

    # -- internals ----------------------------------------------------------------------
    def _remember(self, first: int, entries: list[LogEntry]) -> None:
        """Keep newly durable entries ``first..`` in the recent window (bounded)."""
        if first != self._recent_first + len(self._recent):
            self._recent, self._recent_first, self._recent_bytes = [], first, 0
        self._recent.extend(entries)
        self._recent_bytes += entries_size(entries)
        recent = self._recent
        # Drop the oldest while the window is over either bound (never the newest entry):
        # first those over the count, in one step, then one by one while over the bytes.
        drop = min(len(recent) - 1, max(0, len(recent) - RECENT_ENTRIES))
        if drop:
            self._recent_bytes -= entries_size(recent[:drop])
        while drop < len(recent) - 1 and self._recent_bytes > RECENT_BYTES:
            self._recent_bytes -= recent[drop].size
            drop += 1
        if drop:
            del recent[:drop]
            self._recent_first += drop

    def _forget_recent_from(self, index: int) -> None:
        """The store's entries from ``index`` on are being replaced."""
        keep = max(0, index - self._recent_first)
        if keep < len(self._recent):
            self._recent_bytes -= entries_size(self._recent[keep:])
            del self._recent[keep:]

    def _extend(self, entries: Sequence[LogEntry]) -> None:
        index = self.last_index + 1
        ids = self._unstable_ids
        # in order: a later entry with the same id takes over the mapping; the zero id
        # (checkpoints, configurations) is never mapped
        ids.update(zip(map(_REQUEST_ID, entries), range(index, index + len(entries)), strict=True))
        ids.pop(ZERO_REQUEST_ID, None)
        self._unstable.extend(entries)

    def _drop_unstable_from(self, offset: int) -> None:
        unstable = self._unstable
        if offset >= len(unstable):
            return
        for position in range(offset, len(unstable)):
            self._forget_id(unstable[position], self._unstable_first + position)
        del unstable[offset:]

    def _forget_id(self, entry: LogEntry, index: int) -> None:
        if self._unstable_ids.get(entry.request_id) == index:
            del self._unstable_ids[entry.request_id]
