"""In-memory stores for the deterministic simulator and unit tests, with crash modelling.

Every store separates *synced* state (what survives a crash) from *written but not yet synced*
changes. With ``sync_on_write=True`` (the default) each mutating call is synced on return, as
the Protocols in ``raftlog.storage.base`` require, so ``crash()`` loses nothing. With
``sync_on_write=False`` mutations stay pending until ``sync()``; ``crash(keep_unsynced=k)`` then
drops them, optionally keeping the first ``k`` pending operations (each operation is atomic, the
way one RocksDB WriteBatch is) to model a disk that flushed part of its cache before power loss.

Crash modelling costs nothing in the default mode: the synced copy is taken lazily, on the first
unsynced mutation after a sync (copy-on-write), and ``clone_durable()`` is a shallow list/dict
copy (entries are immutable), cheap enough for a simulator that restarts nodes constantly.

The log and the hard state live here; the snapshot store, in ``memory_snapshot``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from raftlog.entry import ZERO_REQUEST_ID, LogEntry
from raftlog.errors import StorageError
from raftlog.ids import is_expired
from raftlog.storage._checks import (
    DEFAULT_MAX_ENTRY_DATA_SIZE,
    check_append_position,
    check_commit_floor,
    check_entry_sizes,
    check_range,
)
from raftlog.storage.base import HardState, HardStateStore, LogStore, SnapshotStore

if TYPE_CHECKING:
    from raftlog.storage.memory_snapshot import MemorySnapshotStore


@dataclass(slots=True)
class _LogState:
    """The whole content of a log: entries[i] has index ``snapshot_index + 1 + i``."""

    entries: list[LogEntry] = field(default_factory=list)
    snapshot_index: int = 0
    snapshot_term: int = 0
    request_ids: dict[bytes, int] = field(default_factory=dict)

    def copy(self) -> _LogState:
        return _LogState(
            list(self.entries), self.snapshot_index, self.snapshot_term, dict(self.request_ids)
        )

    def append(self, first_index: int, entries: Sequence[LogEntry]) -> None:
        cut = first_index - self.snapshot_index - 1
        if cut < len(self.entries):
            request_ids = self.request_ids
            for index, dropped in enumerate(self.entries[cut:], start=first_index):
                if request_ids.get(dropped.request_id) == index:
                    del request_ids[dropped.request_id]
            del self.entries[cut:]
        self.entries.extend(entries)
        for index, entry in enumerate(entries, start=first_index):
            if entry.request_id != ZERO_REQUEST_ID:
                self.request_ids[entry.request_id] = index

    def compact(self, snapshot_index: int, snapshot_term: int) -> None:
        if snapshot_index <= self.snapshot_index:
            return  # an older (or the same) snapshot: nothing to drop
        keep_suffix = self.term_at(snapshot_index) == snapshot_term
        if keep_suffix:
            del self.entries[: snapshot_index - self.snapshot_index]
        else:
            self.entries = []
            self.request_ids = {}
        self.snapshot_index = snapshot_index
        self.snapshot_term = snapshot_term

    def term_at(self, index: int) -> int | None:
        if index == 0:
            return 0
        if index == self.snapshot_index:
            return self.snapshot_term
        position = index - self.snapshot_index - 1
        if 0 <= position < len(self.entries):
            return self.entries[position].term
        return None


class MemoryLogStore:
    """``LogStore`` over a Python list plus a dict reqid → index (last occurrence wins).

    Extras beyond the Protocol, mirrored by ``RocksLogStore``: ``set_commit_floor``,
    ``prune_request_ids``, ``prune_expired_request_ids``, ``oldest_request_index`` and
    ``raw_entries``; plus the crash-modelling ``sync``/``crash``/``clone_durable``.
    """

    def __init__(
        self,
        sync_on_write: bool = True,
        max_entry_data_size: int = DEFAULT_MAX_ENTRY_DATA_SIZE,
    ) -> None:
        self.sync_on_write = sync_on_write
        self.max_entry_data_size = max_entry_data_size
        self.commit_floor = 0
        self.sync_count = 0
        """How many syncs this store performed (lets tests assert one sync per batch)."""
        self._state = _LogState()
        self._synced: _LogState | None = None  # None: the current state is the synced one
        self._pending: list[tuple[int, int, Sequence[LogEntry] | None]] = []
        self._closed = False

    # -- reads ---------------------------------------------------------------------------
    @property
    def snapshot_index(self) -> int:
        """Index of the last entry the snapshot covers (0: none)."""
        return self._state.snapshot_index

    @property
    def snapshot_term(self) -> int:
        """Term of the entry at ``snapshot_index``."""
        return self._state.snapshot_term

    @property
    def first_index(self) -> int:
        """The first index still in the log (after the snapshot)."""
        return self._state.snapshot_index + 1

    @property
    def last_index(self) -> int:
        """The last index in the log (``snapshot_index`` when empty)."""
        return self._state.snapshot_index + len(self._state.entries)

    def term_at(self, index: int) -> int | None:
        """The term at ``index``, or None when it is compacted away or beyond the log."""
        return self._state.term_at(index)

    def entries(self, lo: int, hi: int, max_bytes: int | None = None) -> list[LogEntry]:
        """Entries ``lo`` (inclusive) to ``hi`` (exclusive), at most ``max_bytes`` (at least
        one)."""
        self._check_open()
        check_range(lo, hi, self.first_index, self.last_index)
        if lo >= hi:
            return []
        base = self._state.snapshot_index + 1
        chosen = self._state.entries[lo - base : hi - base]
        if max_bytes is None:
            return chosen
        total = 0
        for count, entry in enumerate(chosen):
            total += entry.size
            if total > max_bytes and count > 0:
                return chosen[:count]
        return chosen

    def raw_entries(self, lo: int, hi: int, max_bytes: int | None = None) -> list[bytes]:
        """Serialized entries ``[lo, hi)`` (same bounds and byte limit as ``entries``)."""
        return [entry.to_bytes() for entry in self.entries(lo, hi, max_bytes)]

    def index_of_request(self, request_id: bytes) -> int | None:
        """The index a request id was appended at, or None (the at-most-once lookup)."""
        return self._state.request_ids.get(request_id)

    def indexes_of_requests(self, request_ids: Sequence[bytes]) -> list[int | None]:
        """``index_of_request`` of each id, in order (the batch lookup of a proposal batch)."""
        known = self._state.request_ids
        return [known.get(request_id) for request_id in request_ids]

    def request_ids(self) -> dict[bytes, int]:
        """A copy of the request-id index (for invariant checks in tests and the simulator)."""
        return dict(self._state.request_ids)

    def oldest_request_index(self) -> int | None:
        """Lowest log index still in the request-id index (the prune index + 1,
        docs/protocol.md §12.7)."""
        return min(self._state.request_ids.values(), default=None)

    # -- writes --------------------------------------------------------------------------
    def set_commit_floor(self, index: int) -> None:
        """Refuse from now on any append that would drop or change entries up to ``index``."""
        self.commit_floor = max(self.commit_floor, index)

    def append(self, first_index: int, entries: Sequence[LogEntry]) -> None:
        """Truncate at ``first_index`` and append; synced on return if ``sync_on_write``."""
        self._check_open()
        check_append_position(first_index, self.first_index, self.last_index)
        check_entry_sizes(entries, self.max_entry_data_size)
        check_commit_floor(first_index, entries, self.commit_floor, self.last_index, self.term_at)
        self._before_write()
        entries = list(entries)
        self._state.append(first_index, entries)
        self._after_write((0, first_index, entries))

    def compact(self, snapshot_index: int, snapshot_term: int) -> None:
        """Drop the prefix up to ``snapshot_index`` (§12.6); synced on return if
        ``sync_on_write``. Refuses to discard entries above the commit floor's reach."""
        self._check_open()
        if (
            snapshot_index > self.snapshot_index
            and self.term_at(snapshot_index) != snapshot_term
            and self.commit_floor > snapshot_index
        ):
            raise StorageError(
                f"snapshot {snapshot_index}/{snapshot_term} conflicts with committed entries "
                f"up to {self.commit_floor}"
            )
        self._before_write()
        self._state.compact(snapshot_index, snapshot_term)
        self._after_write((snapshot_index, snapshot_term, None))

    def prune_request_ids(self, before_index: int) -> int:
        """Forget request ids of entries below ``before_index``; returns how many.

        Not synced on its own: losing a prune in a crash only keeps ids a little longer."""
        self._check_open()
        ids = self._state.request_ids
        stale = [rid for rid, index in ids.items() if index < before_index]
        for rid in stale:
            del ids[rid]
        return len(stale)

    def prune_expired_request_ids(self, now_ms: int, ttl_ms: int | None) -> int:
        """Forget expired ids from the oldest index up to the first fresh one (§12.7)."""
        self._check_open()
        ids = self._state.request_ids
        pruned = 0
        for rid, _index in sorted(ids.items(), key=lambda item: item[1]):
            if not is_expired(rid, now_ms, ttl_ms):
                break
            del ids[rid]
            pruned += 1
        return pruned

    # -- crash modelling -----------------------------------------------------------------
    def sync(self) -> None:
        """Make every pending write durable (what an fsync does)."""
        self._synced = None
        self._pending.clear()
        self.sync_count += 1

    def crash(self, keep_unsynced: int = 0) -> None:
        """Lose every unsynced write except the first ``keep_unsynced`` pending operations."""
        if self._synced is not None:
            state = self._synced
            for op in self._pending[:keep_unsynced]:
                if op[2] is None:
                    state.compact(op[0], op[1])
                else:
                    state.append(op[1], op[2])
            self._state = state
        self._synced = None
        self._pending.clear()
        self._closed = False

    def clone_durable(self) -> MemoryLogStore:
        """A new store holding only this store's synced state (same settings and floor)."""
        clone = MemoryLogStore(self.sync_on_write, self.max_entry_data_size)
        clone._state = (self._synced or self._state).copy()
        clone.commit_floor = self.commit_floor
        return clone

    @property
    def unsynced_operations(self) -> int:
        """Writes not synced yet: what a crash (``crash``) would lose."""
        return len(self._pending)

    def close(self) -> None:
        """Mark closed: later use raises, as the RocksDB store's does."""
        self._closed = True

    def _check_open(self) -> None:
        if self._closed:
            raise StorageError("log store is closed")

    def _before_write(self) -> None:
        if not self.sync_on_write and self._synced is None:
            self._synced = self._state.copy()

    def _after_write(self, op: tuple[int, int, Sequence[LogEntry] | None]) -> None:
        if self.sync_on_write:
            self.sync_count += 1
        else:
            self._pending.append(op)


class MemoryHardStateStore:
    """``HardStateStore`` in memory; ``crash()`` reverts to the last synced state."""

    def __init__(self, sync_on_write: bool = True) -> None:
        self.sync_on_write = sync_on_write
        self.sync_count = 0
        self._state = HardState()
        self._synced = self._state

    def load(self) -> HardState:
        """The hard state as last saved (synced or not: what this process sees)."""
        return self._state

    def save(self, state: HardState) -> None:
        """Replace the hard state (synced on return when ``sync_on_write``)."""
        self._state = state
        if self.sync_on_write:
            self.sync()

    def save_applied(self, last_applied: int) -> None:
        """Record progress (never backwards); synced like ``save`` -- in memory a sync is
        free, and the simulator's crash points then see what a synced store would keep."""
        if last_applied > self._state.last_applied:
            self.save(self._state.with_applied(last_applied))

    def sync(self) -> None:
        """Make the saved hard state durable (what survives ``crash``)."""
        self._synced = self._state
        self.sync_count += 1

    def crash(self) -> None:
        """Forget what was not synced, as a process crash would."""
        self._state = self._synced

    def clone_durable(self) -> MemoryHardStateStore:
        """A new store holding only what is durable here (a restarted peer's view)."""
        clone = MemoryHardStateStore(self.sync_on_write)
        clone._state = clone._synced = self._synced
        return clone

    def close(self) -> None:
        """Nothing to release (the interface's close, for symmetry with RocksDB)."""
        return None


if TYPE_CHECKING:  # mypy proves the memory stores satisfy the Protocols

    def _conforms(
        log: MemoryLogStore, hard_state: MemoryHardStateStore, snapshots: MemorySnapshotStore
    ) -> tuple[LogStore, HardStateStore, SnapshotStore]:
        return log, hard_state, snapshots
