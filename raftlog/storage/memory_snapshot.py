"""The in-memory snapshot store, for the deterministic simulator and unit tests.

Why apart from ``memory``: the snapshot store shares nothing with the in-memory log and hard
state but the crash model (``raftlog.storage.memory``: synced state survives ``crash()``,
unsynced state does not); its receive side follows InstallSnapshot's rules (docs/protocol.md
§9), the way ``raftlog.storage.snapshot.FileSnapshotStore`` does on disk.
"""

from __future__ import annotations

from raftlog.errors import StorageError
from raftlog.storage.base import SnapshotMeta


class MemorySnapshotStore:
    """``SnapshotStore`` in memory, with the same incremental receive API as the file store.

    ``begin``/``write_chunk``/``finish`` follow InstallSnapshot's receiver rules
    (docs/protocol.md §9): one pending snapshot identified by (index, term, total size); a
    chunk at any offset other than the bytes received so far is not written. A pending
    receive never survives ``crash``.
    """

    def __init__(self, sync_on_write: bool = True) -> None:
        self.sync_on_write = sync_on_write
        self._meta: SnapshotMeta | None = None
        self._data = b""
        self._synced: tuple[SnapshotMeta | None, bytes] = (None, b"")
        self._receiving: tuple[int, int, int] | None = None
        self._received = bytearray()

    def meta(self) -> SnapshotMeta | None:
        """The installed snapshot's index, term and size, or None."""
        return self._meta

    def read(self, offset: int, size: int) -> bytes:
        """``size`` bytes of the installed snapshot from ``offset`` (for streaming it out)."""
        if self._meta is None:
            raise StorageError("no snapshot installed")
        if offset < 0 or size < 0:
            raise ValueError("offset and size must be non-negative")
        return self._data[offset : offset + size]

    def install(self, index: int, term: int, data: bytes) -> SnapshotMeta:
        """Install ``data`` as the snapshot of ``index``/``term`` (synced if ``sync_on_write``)."""
        self._meta = SnapshotMeta(index, term, len(data))
        self._data = bytes(data)
        if self.sync_on_write:
            self.sync()
        return self._meta

    def begin(self, index: int, term: int, total_size: int) -> int:
        """Start (or continue) receiving a snapshot; returns the bytes already received."""
        if total_size < 0:
            raise ValueError("total size must be non-negative")
        if self._receiving != (index, term, total_size):
            self._receiving = (index, term, total_size)
            self._received = bytearray()
        return len(self._received)

    def write_chunk(self, offset: int, data: bytes) -> int:
        """Append ``data`` if ``offset`` equals the bytes received so far; returns that count
        afterwards (unchanged when the chunk was refused)."""
        if self._receiving is None:
            raise StorageError("write_chunk without begin")
        received = len(self._received)
        if offset == received and received + len(data) <= self._receiving[2]:
            self._received += data
        return len(self._received)

    def finish(self) -> SnapshotMeta:
        """Install the completely received snapshot (durable on return if ``sync_on_write``)."""
        if self._receiving is None:
            raise StorageError("finish without begin")
        index, term, total = self._receiving
        if len(self._received) != total:
            raise StorageError(f"snapshot incomplete: {len(self._received)} of {total} bytes")
        self._receiving = None
        data, self._received = bytes(self._received), bytearray()
        return self.install(index, term, data)

    def sync(self) -> None:
        """Make the installed snapshot durable (what survives ``crash``)."""
        self._synced = (self._meta, self._data)

    def crash(self) -> None:
        """Forget the unsynced snapshot and any half-received one, as a crash would."""
        self._meta, self._data = self._synced
        self._receiving = None
        self._received = bytearray()

    def clone_durable(self) -> MemorySnapshotStore:
        """A new store holding only the durable snapshot (a restarted peer's view)."""
        clone = MemorySnapshotStore(self.sync_on_write)
        clone._meta, clone._data = self._synced
        clone._synced = self._synced
        return clone

    def close(self) -> None:
        """Nothing to release (the interface's close, for symmetry with the file store)."""
        return None

