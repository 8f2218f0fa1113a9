"""State-machine snapshots as one file per peer, installed atomically and checksummed.

File ``snapshot.bin`` = a 41-byte header followed by the opaque snapshot data::

    magic b"RAFTSNAP" | version (1) | index (8 BE) | term (8 BE) | size (8 BE)
    | CRC32 of the data (4 BE) | CRC32 of the header bytes before it (4 BE)

Keeping the metadata in the header (not a sidecar) makes installation a single rename: there is
never a state where metadata and data disagree. Where it syncs (``install``/``finish``):

1. fsync the temp file (header + data) — failpoint ``before_sync``, bug switch
   ``snapshot_sync=skip``;
2. ``rename`` it over ``snapshot.bin`` — failpoints ``before_snapshot_rename`` /
   ``after_snapshot_rename``;
3. fsync the directory so the rename itself survives power loss — failpoint ``before_sync``,
   bug switch ``snapshot_dir_sync=skip``.

Opening verifies the header and the data CRC (reading the file once) and removes temp files
left by a crash; a bad snapshot raises ``StorageCorruptionError`` and is never served.
"""

from __future__ import annotations

import os
import struct
import zlib
from pathlib import Path
from typing import Final

from raftlog.errors import StorageCorruptionError, StorageError
from raftlog.storage import failpoints
from raftlog.storage.base import LogStore, SnapshotMeta
from raftlog.storage.durable_dirs import fsync_dir, make_dirs

SNAPSHOT_FILE: Final = "snapshot.bin"
_INSTALL_TMP: Final = "snapshot.bin.tmp"
_RECEIVE_TMP: Final = "receiving.tmp"
_MAGIC: Final = b"RAFTSNAP"
_HEADER: Final = struct.Struct(">8sBQQQI")
HEADER_SIZE: Final = _HEADER.size + 4
_VERIFY_CHUNK: Final = 1 << 20


def _header(index: int, term: int, size: int, data_crc: int) -> bytes:
    body = _HEADER.pack(_MAGIC, 1, index, term, size, data_crc)
    return body + zlib.crc32(body).to_bytes(4, "big")


def _parse_header(raw: bytes, path: Path) -> tuple[SnapshotMeta, int]:
    if len(raw) < HEADER_SIZE:
        raise StorageCorruptionError(f"{path}: snapshot header truncated ({len(raw)} bytes)")
    body, crc = raw[: _HEADER.size], raw[_HEADER.size : HEADER_SIZE]
    if zlib.crc32(body).to_bytes(4, "big") != crc:
        raise StorageCorruptionError(f"{path}: snapshot header checksum mismatch")
    magic, version, index, term, size, data_crc = _HEADER.unpack(body)
    if magic != _MAGIC or version != 1:
        raise StorageCorruptionError(f"{path}: not a raftlog snapshot (version {version})")
    return SnapshotMeta(index, term, size), data_crc


class FileSnapshotStore:
    """``SnapshotStore`` in a directory, plus an incremental receiver for InstallSnapshot.

    Receiving follows docs/protocol.md §9: one pending snapshot identified by (index, term, total
    size); ``begin`` with another triple discards it; a chunk whose offset is not the number of
    bytes received so far is not written. The pending file does not survive a restart.
    """

    def __init__(self, directory: str | Path, *, read_only: bool = False, verify: bool = True):
        self.directory = Path(directory)
        self.read_only = read_only
        self._meta: SnapshotMeta | None = None
        self._data_crc = 0
        self._fd: int | None = None
        self._receiving: tuple[int, int, int] | None = None
        self._receive_fd: int | None = None
        self._received = 0
        self._received_crc = 0
        if not read_only:
            make_dirs(self.directory)
            for leftover in (_INSTALL_TMP, _RECEIVE_TMP):
                (self.directory / leftover).unlink(missing_ok=True)
        self._open_installed(verify)

    @property
    def path(self) -> Path:
        """The installed snapshot's file (backups and tools copy it)."""
        return self.directory / SNAPSHOT_FILE

    def _open_installed(self, verify: bool) -> None:
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except FileNotFoundError:
            return
        except OSError as exc:
            raise StorageError(f"{self.path}: {exc.strerror}") from None
        try:
            meta, data_crc = _parse_header(os.pread(fd, HEADER_SIZE, 0), self.path)
            actual = os.fstat(fd).st_size - HEADER_SIZE
            if actual != meta.size:
                raise StorageCorruptionError(
                    f"{self.path}: snapshot holds {actual} data bytes, header says {meta.size}"
                )
            if verify and self._crc_of(fd, meta.size) != data_crc:
                raise StorageCorruptionError(f"{self.path}: snapshot data checksum mismatch")
        except BaseException:
            os.close(fd)
            raise
        self._replace_fd(fd, meta, data_crc)

    @staticmethod
    def _crc_of(fd: int, size: int) -> int:
        crc = 0
        for offset in range(0, size, _VERIFY_CHUNK):
            chunk = os.pread(fd, min(_VERIFY_CHUNK, size - offset), HEADER_SIZE + offset)
            crc = zlib.crc32(chunk, crc)
        return crc

    def _replace_fd(self, fd: int, meta: SnapshotMeta, data_crc: int) -> None:
        old, self._fd, self._meta, self._data_crc = self._fd, fd, meta, data_crc
        if old is not None:
            os.close(old)

    def verify(self) -> SnapshotMeta | None:
        """Re-read the installed snapshot and check its checksum (for ``raftlog-tool verify``)."""
        fd = os.open(self.path, os.O_RDONLY) if self._meta is not None else None
        if fd is None:
            return None
        try:
            meta, data_crc = _parse_header(os.pread(fd, HEADER_SIZE, 0), self.path)
            if self._crc_of(fd, meta.size) != data_crc:
                raise StorageCorruptionError(f"{self.path}: snapshot data checksum mismatch")
            return meta
        finally:
            os.close(fd)

    # -- reads ---------------------------------------------------------------------------
    def meta(self) -> SnapshotMeta | None:
        """The installed snapshot's index, term and size, or None."""
        return self._meta

    def read(self, offset: int, size: int) -> bytes:
        """Up to ``size`` data bytes from ``offset`` (``pread``: safe from several threads).

        The read that reaches the end of the data first checks the whole file against its
        checksum, so a snapshot that went bad on disk after it was opened (a bit flip under
        a running peer) is never handed out whole: whoever streams it — a leader's
        InstallSnapshot, a client's RequestEntries — gets ``StorageCorruptionError`` instead
        of its last chunk, and a receiver never installs it. One extra read of the file per
        complete transfer; corruption only goes one way, so a clean file at the end means the
        chunks read before were clean too."""
        if self._fd is None or self._meta is None:
            raise StorageError("no snapshot installed")
        if offset < 0 or size < 0:
            raise ValueError("offset and size must be non-negative")
        size = max(0, min(size, self._meta.size - offset))
        end = offset + size == self._meta.size
        if end and self._crc_of(self._fd, self._meta.size) != self._data_crc:
            raise StorageCorruptionError(f"{self.path}: snapshot data checksum mismatch")
        return os.pread(self._fd, size, HEADER_SIZE + offset) if size else b""

    # -- writes --------------------------------------------------------------------------
    def install(self, index: int, term: int, data: bytes) -> SnapshotMeta:
        """Make ``data`` the installed snapshot; durable on return (see module docstring)."""
        self._check_writable()
        tmp = self.directory / _INSTALL_TMP
        try:
            data_crc = zlib.crc32(data)
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            try:
                os.write(fd, _header(index, term, len(data), data_crc))
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view) :]
            except BaseException:
                os.close(fd)
                tmp.unlink(missing_ok=True)
                raise
            return self._commit(fd, tmp, SnapshotMeta(index, term, len(data)), data_crc)
        except OSError as exc:
            raise StorageError(f"installing snapshot {index}: {exc.strerror or exc}") from None

    def _commit(self, fd: int, tmp: Path, meta: SnapshotMeta, data_crc: int) -> SnapshotMeta:
        """fsync ``fd`` and close it, rename ``tmp`` into place, fsync the directory. A failure
        before the rename removes ``tmp`` and leaves the installed snapshot untouched."""
        try:
            if failpoints.ENABLED:
                failpoints.hit("before_sync")
            if not (failpoints.ENABLED and failpoints.skipped("snapshot_sync")):
                os.fsync(fd)
        except BaseException:
            os.close(fd)
            tmp.unlink(missing_ok=True)
            raise
        os.close(fd)
        try:
            if failpoints.ENABLED:
                failpoints.hit("before_snapshot_rename")
            os.replace(tmp, self.path)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        if failpoints.ENABLED:
            failpoints.hit("after_snapshot_rename")
        self._replace_fd(os.open(self.path, os.O_RDONLY), meta, data_crc)
        fsync_dir(self.directory, "snapshot_dir_sync")
        return meta

    def begin(self, index: int, term: int, total_size: int) -> int:
        """Start receiving (index, term, total_size), or continue if it is the pending one;
        returns the number of data bytes already received."""
        self._check_writable()
        if total_size < 0:
            raise ValueError("total size must be non-negative")
        if self._receiving == (index, term, total_size):
            return self._received
        self._abort_receive()
        tmp = self.directory / _RECEIVE_TMP
        try:
            fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
            os.write(fd, bytes(HEADER_SIZE))  # the real header is written by finish()
        except OSError as exc:
            raise StorageError(f"receiving snapshot {index}: {exc.strerror or exc}") from None
        self._receiving, self._receive_fd = (index, term, total_size), fd
        self._received = self._received_crc = 0
        return 0

    def _accepts(self, offset: int, data: bytes) -> bool:
        if self._receiving is None or self._receive_fd is None:
            raise StorageError("write_chunk without begin")
        return offset == self._received and offset + len(data) <= self._receiving[2]

    def _account(self, data: bytes) -> int:
        self._received += len(data)
        self._received_crc = zlib.crc32(data, self._received_crc)
        return self._received

    def write_chunk(self, offset: int, data: bytes) -> int:
        """Write ``data`` if ``offset`` equals the bytes received so far (and it fits in the
        announced size). Returns the bytes received afterwards: ``offset + len(data)`` when the
        chunk was taken, the unchanged count (what to ask the leader for) when refused."""
        if not self._accepts(offset, data):
            return self._received
        assert self._receive_fd is not None
        try:
            os.pwrite(self._receive_fd, data, HEADER_SIZE + offset)
        except OSError as exc:
            raise StorageError(f"writing snapshot chunk: {exc.strerror or exc}") from None
        return self._account(data)

    def finish(self) -> SnapshotMeta:
        """Install the fully received snapshot; durable on return (see module docstring)."""
        if self._receiving is None or self._receive_fd is None:
            raise StorageError("finish without begin")
        index, term, total = self._receiving
        if self._received != total:
            raise StorageError(f"snapshot incomplete: {self._received} of {total} bytes")
        fd, tmp = self._receive_fd, self.directory / _RECEIVE_TMP
        self._receiving = self._receive_fd = None
        try:
            os.pwrite(fd, _header(index, term, total, self._received_crc), 0)
            return self._commit(fd, tmp, SnapshotMeta(index, term, total), self._received_crc)
        except OSError as exc:
            raise StorageError(f"installing snapshot {index}: {exc.strerror or exc}") from None

    def _abort_receive(self) -> None:
        if self._receive_fd is not None:
            os.close(self._receive_fd)
            (self.directory / _RECEIVE_TMP).unlink(missing_ok=True)
        self._receiving = self._receive_fd = None

    def _check_writable(self) -> None:
        if self.read_only:
            raise StorageError(f"{self.directory}: snapshot store was opened read-only")

    def close(self) -> None:
        """Drop a half-received snapshot and close the file (idempotent)."""
        self._abort_receive()
        if self._fd is not None:
            os.close(self._fd)
        self._fd = self._meta = None


def check_snapshot_covers_log(root: Path, log: LogStore, snapshots: FileSnapshotStore) -> None:
    """A peer's start-up check (``raftlog-tool verify`` reports the same): a log compacted
    to N needs a snapshot at N or later. Installing writes the snapshot (durably) before
    compacting the log, so an older or missing snapshot means the file was lost -- e.g. a
    power cut after a rename whose directory was never fsynced -- and the entries up to N
    exist nowhere on this peer. Raises ``StorageCorruptionError``."""
    if log.snapshot_index == 0:
        return
    meta = snapshots.meta()
    if meta is None or meta.index < log.snapshot_index:
        have = "no snapshot" if meta is None else f"a snapshot only up to {meta.index}"
        raise StorageCorruptionError(
            f"{root}: the log was compacted up to {log.snapshot_index} but there is {have}: "
            "entries are missing"
        )
