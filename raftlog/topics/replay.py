"""Replaying the log into the topic index at start-up (``TopicStateMachine.catch_up``).

Why apart from the machine: replay is the one path that reads the log back (in bounded
chunks) and may first restore a snapshot; the machine itself only applies what it is given.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final, Protocol

from raftlog.storage.base import SnapshotStore
from raftlog.topics.retention import EntrySource
from raftlog.topics.snapshot import snapshot_part

CATCH_UP_BYTES: Final = 8 * 1024 * 1024
"""At most this many bytes of entries per replayed chunk (bounds memory at start-up)."""


class Replayable(Protocol):
    """What replay needs of the machine."""

    name: str

    @property
    def last_applied(self) -> int:
        """The index the machine's own state is at."""
        ...

    def restore(self, index: int, term: int, data: bytes) -> None:
        """Replace the state by a snapshot's part."""
        ...

    def apply(self, first_index: int, entries: Sequence[bytes], term: int) -> None:
        """Apply raw entries from ``first_index``."""
        ...


def catch_up(
    machine: Replayable, store: EntrySource, snapshots: SnapshotStore, upto: int
) -> None:
    """Bring ``machine`` to ``upto`` (the peer's persisted last_applied) from its own
    position: restore the snapshot if the log was compacted past it, then re-apply."""
    if machine.last_applied < store.snapshot_index:
        meta = snapshots.meta()
        data = snapshots.read(0, meta.size) if meta is not None else b""
        index = meta.index if meta is not None else store.snapshot_index
        term = meta.term if meta is not None else store.snapshot_term
        machine.restore(index, term, snapshot_part(data, machine.name))
    while machine.last_applied < upto:
        lo = machine.last_applied + 1
        machine.apply(lo, store.raw_entries(lo, upto + 1, CATCH_UP_BYTES), 0)
