"""The storage interfaces: a log store, a hard-state store and a snapshot store.

Both implementations (``memory`` for the simulator and unit tests, ``rocks`` for peers) satisfy
these Protocols and pass the same conformance suite (``tests/unit/storage``).

Index conventions (Raft's): the first real entry has index 1; index 0 has term 0. A snapshot
covers every index up to and including ``snapshot_index``; the log then holds
``first_index = snapshot_index + 1 .. last_index`` (``last_index = snapshot_index`` when the log
is empty). Ranges are half-open ``[lo, hi)`` like Python slices.

Durability: every method whose docstring says *durable on return* is the one place that
syncs; nothing it wrote may be lost by a crash after it returns, and a crash before it returns
leaves either all or none of its effect (never a torn record that reads back as data).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from raftlog.entry import LogEntry
from raftlog.rpc.messages import ConfigPayload


class LogStore(Protocol):
    """The replicated log: entries, their terms, and the request-id index for idempotency."""

    @property
    def snapshot_index(self) -> int:
        """Last index covered by the installed snapshot (0 when there is none)."""
        ...

    @property
    def snapshot_term(self) -> int:
        """Term of ``snapshot_index`` (0 when there is no snapshot)."""
        ...

    @property
    def first_index(self) -> int:
        """``snapshot_index + 1``: the first index that may be read as an entry."""
        ...

    @property
    def last_index(self) -> int:
        """Index of the last entry, or ``snapshot_index`` when the log holds none."""
        ...

    def term_at(self, index: int) -> int | None:
        """Term of the entry at ``index``; ``0`` for index 0, ``snapshot_term`` for
        ``snapshot_index``; ``None`` when below the snapshot or beyond ``last_index``."""
        ...

    def entries(self, lo: int, hi: int, max_bytes: int | None = None) -> list[LogEntry]:
        """Entries ``[lo, hi)``; with ``max_bytes``, stops before the entry that would exceed
        it but always returns at least one entry when the range is non-empty.
        Raises ``IndexError`` if ``lo < first_index`` or ``hi > last_index + 1``."""
        ...

    def index_of_request(self, request_id: bytes) -> int | None:
        """Log index of the entry carrying this (non-zero) request id, if it is in the log.

        Covers compacted entries too, as long as the id has not been pruned
        (docs/protocol.md §12.7), so that idempotency survives compaction."""
        ...

    def indexes_of_requests(self, request_ids: Sequence[bytes]) -> list[int | None]:
        """``index_of_request`` of each id, in order: the leader proposes every RequestUpdate
        of a ROUTER drain as one batch, and one lookup of all its ids costs far less than one
        per id (issue #28)."""
        ...

    def append(self, first_index: int, entries: Sequence[LogEntry]) -> None:
        """Write ``entries`` at ``first_index``, ``first_index+1``, ... after discarding every
        entry at or after ``first_index`` (the implied suffix truncation).

        Requires ``first_index_of_log <= first_index <= last_index + 1``. Durable on return:
        one sync for the whole batch. Raises ``EntryTooLargeError`` for an entry over the
        configured maximum, ``StorageError`` on I/O failure (nothing written)."""
        ...

    def compact(self, snapshot_index: int, snapshot_term: int) -> None:
        """A snapshot now covers everything up to ``snapshot_index``: drop that prefix.

        If the log holds ``snapshot_index`` with ``snapshot_term`` the later entries are kept;
        otherwise the whole log is discarded and restarts at ``snapshot_index + 1``
        (docs/protocol.md §12.6). Durable on return."""
        ...

    def raw_entries(self, lo: int, hi: int, max_bytes: int | None = None) -> list[bytes]:
        """Serialized entries ``[lo, hi)`` (same bounds and limit as ``entries``), for
        streaming them without decoding and re-encoding each one."""
        ...

    def oldest_request_index(self) -> int | None:
        """Lowest index still in the request-id index (docs/protocol.md §12.7 prune index + 1), or
        None when the index is empty: compaction must not pass it."""
        ...

    def set_commit_floor(self, index: int) -> None:
        """Refuse from now on any append that would drop or change entries up to ``index``
        (in memory only: the driver sets it again from the hard state after a restart)."""
        ...

    def prune_request_ids(self, before_index: int) -> int:
        """Forget the request ids of entries below ``before_index``; returns how many. Not
        synced on its own: a prune lost in a crash only keeps some ids a little longer."""
        ...

    def prune_expired_request_ids(self, now_ms: int, ttl_ms: int | None) -> int:
        """Forget expired ids from the oldest entry up to the first fresh one (§12.7); not
        synced on its own (as ``prune_request_ids``)."""
        ...

    def close(self) -> None:
        """Release files/handles; further calls are errors."""
        ...


@dataclass(frozen=True, slots=True)
class HardState:
    """What a peer must remember across restarts besides the log.

    ``config``/``config_index``: the latest configuration in effect and the index of the CONFIG
    entry that carried it (0 for the seed configuration from the config file).
    ``last_applied``: the state machine's applied index (commit restarts from here).
    """

    current_term: int = 0
    voted_for: str | None = None
    config: ConfigPayload | None = None
    config_index: int = 0
    last_applied: int = 0

    def with_applied(self, applied: int) -> HardState:
        """This state carrying ``applied`` as its ``last_applied`` when that is further (never
        backwards). Built directly rather than with ``dataclasses.replace``: it runs once per
        write and once per apply on the hot path."""
        if applied <= self.last_applied:
            return self
        return HardState(self.current_term, self.voted_for, self.config, self.config_index, applied)


class HardStateStore(Protocol):
    """The hard state (term, vote, configuration, applied index) across restarts."""

    def load(self) -> HardState:
        """The last saved hard state (a default ``HardState()`` for a new store)."""
        ...

    def save(self, state: HardState) -> None:
        """Replace the hard state. Durable on return."""
        ...

    def save_applied(self, last_applied: int) -> None:
        """Record the state machine's progress, possibly **without a sync of its own** (it
        rides on the next synced write). Losing it in a crash only makes the peer apply a few
        committed entries again. Never moves ``last_applied`` backwards."""
        ...

    def close(self) -> None:
        """Release files/handles; further calls are errors."""
        ...


class ReadyStore(Protocol):
    """Steps 1 and 3 of a Ready (hard state, log append) as **one** synced write.

    A Ready that changes the term or vote and appends entries would otherwise pay two fsyncs
    in a row; written together they cost one, and a crash leaves both or neither."""

    def persist(
        self, hard_state: HardState | None, first_index: int, entries: Sequence[LogEntry] | None
    ) -> None:
        """Save ``hard_state`` (when not None) and, when ``entries`` is not None, truncate the
        log at ``first_index`` and append ``entries`` (as ``LogStore.append``; an empty
        sequence is a pure truncation). Durable on return: one sync for both."""
        ...


@dataclass(frozen=True, slots=True)
class SnapshotMeta:
    """An installed snapshot: the last index and term it covers, and its data size."""

    index: int
    term: int
    size: int


class SnapshotStore(Protocol):
    """Opaque state-machine snapshots, read in chunks for InstallSnapshot/RequestEntries,
    and received in chunks from a leader (InstallSnapshot, a catch-up's RequestEntries)."""

    def meta(self) -> SnapshotMeta | None:
        """The installed snapshot's metadata, or None when there is none."""
        ...

    def read(self, offset: int, size: int) -> bytes:
        """Up to ``size`` bytes of the installed snapshot's data starting at ``offset``."""
        ...

    def install(self, index: int, term: int, data: bytes) -> SnapshotMeta:
        """Make ``data`` the installed snapshot. Durable on return (temp file, fsync,
        rename, directory fsync)."""
        ...

    def begin(self, index: int, term: int, total_size: int) -> int:
        """Start receiving snapshot ``(index, term, total_size)``, or continue it if it is
        the one pending; returns the data bytes already received. Not durable: a pending
        receive does not survive a restart."""
        ...

    def write_chunk(self, offset: int, data: bytes) -> int:
        """Take ``data`` if ``offset`` equals the bytes received so far (and it fits the
        announced size); returns the bytes received afterwards (unchanged when refused)."""
        ...

    def finish(self) -> SnapshotMeta:
        """Install the completely received snapshot. Durable on return (as ``install``)."""
        ...

    def close(self) -> None:
        """Release files/handles; further calls are errors."""
        ...
