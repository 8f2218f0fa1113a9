"""Consistent backups of a peer's data directory, taken while the peer runs.

Why a logical copy and not RocksDB's checkpoint or a file copy: the live peer holds the
database's lock, so a backup tool can only open it read-only (or as a secondary). RocksDB
checkpoints taken from such an instance leave out the write-ahead log, i.e. every write
not yet flushed to an SST file — measured: a checkpoint of a read-only instance of a database
holding 1,000 unflushed keys contained none of them. Copying files (or hard-linking them)
races with the peer's flushes and compactions. A read-only instance, however, is a fixed
point-in-time view: RocksDB replays the WAL prefix it finds when it opens (a torn tail
record is a write that was never acknowledged and is dropped) and never changes afterwards.
Scanning that view into a fresh database gives a copy of the log, the request-id index and
the hard state as of one instant, all three from the same atomic write sequence.

The snapshot file lives beside the database and is replaced by ``rename``, so it is read
through one open descriptor (one version of the file whatever happens meanwhile) and copied
**before** the log. The peer installs a snapshot before compacting the log past it, so the
copy is consistent iff the copied snapshot covers the log's compaction base
(``snapshot.index >= log.snapshot_index``); if a new snapshot and a compaction both happened
between the two copies, that check fails and the backup is retried.

The topic index (``<data_dir>/topics``) is derived data: a peer rebuilds it from the
snapshot and the log at start-up, so it is not copied. The finished backup is verified
(every checksum, every index: ``raftlog.storage.verify``) in a temporary directory and only
then renamed to its destination, so a directory at ``DEST`` is always a complete, verified
data directory. Where it syncs: the copied snapshot file (fsync), the database's last batch
(synced write), the manifest (fsync), and the destination's parent directory after the rename.

No asyncio here: the backup is one sequential pass driven by a CLI, so ``aiofiles`` would add
an event loop without overlapping anything.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from rocksdict import WriteBatch

from raftlog.errors import StorageError
from raftlog.storage.rocks import (
    LOG_DIR,
    SNAPSHOT_DIR,
    RocksHardStateStore,
    RocksLogStore,
    open_log_database,
)
from raftlog.storage.snapshot import HEADER_SIZE, SNAPSHOT_FILE, FileSnapshotStore
from raftlog.storage.verify import verify_data_dir

MANIFEST = "raftlog-backup.json"
_BATCH_BYTES = 4 << 20
_COPY_CHUNK = 1 << 20


class BackupError(StorageError):
    """The backup could not be taken (or did not verify); nothing is left at the destination."""


@dataclass(frozen=True, slots=True)
class BackupReport:
    """What a backup holds (also written to ``raftlog-backup.json`` inside it)."""

    source: str
    created_utc: str
    first_index: int
    last_index: int
    last_term: int
    current_term: int
    last_applied: int
    snapshot_index: int | None
    keys: int
    bytes_copied: int
    attempts: int


def _fsync_path(path: Path, directory: bool = False) -> None:
    fd = os.open(path, (os.O_RDONLY | os.O_DIRECTORY) if directory else os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _copy_snapshot(source: Path, dest_dir: Path) -> int | None:
    """Copy ``snapshot.bin`` through one descriptor; returns its index (None: no snapshot).

    The header is parsed (and the data CRC checked later by verify) from the copy itself, so
    the index reported is the one of the bytes actually copied."""
    path = source / SNAPSHOT_DIR / SNAPSHOT_FILE
    try:
        src = open(path, "rb")  # noqa: SIM115 -- held while copying, closed below
    except FileNotFoundError:
        return None
    dest_dir.mkdir(parents=True)
    target = dest_dir / SNAPSHOT_FILE
    with src, open(target, "wb") as out:
        while chunk := src.read(_COPY_CHUNK):
            out.write(chunk)
        out.flush()
        os.fsync(out.fileno())
    _fsync_path(dest_dir, directory=True)
    if target.stat().st_size < HEADER_SIZE:
        raise BackupError(f"{path}: snapshot file shorter than its header")
    snapshots = FileSnapshotStore(dest_dir, read_only=True, verify=False)
    try:
        meta = snapshots.meta()
    finally:
        snapshots.close()
    return None if meta is None else meta.index


def _copy_database(source: Path, dest: Path) -> tuple[int, int]:
    """Scan a read-only view of ``source`` into a new database at ``dest``: (keys, bytes)."""
    view = open_log_database(source, read_only=True)
    try:
        copy = open_log_database(dest, create=True)
        try:
            keys = size = pending = 0
            batch = WriteBatch(raw_mode=True)
            for key, value in view.scan_all("the log database"):
                batch.put(key, value, copy.family_of(key))
                keys += 1
                pending += len(key) + len(value)
                if pending >= _BATCH_BYTES:
                    copy.write(batch, sync=False, what="the backup copy")
                    size += pending
                    pending = 0
                    batch = WriteBatch(raw_mode=True)
            copy.write(batch, sync=True, what="the backup copy")  # the fsync point
            return keys, size + pending
        finally:
            copy.release()
    finally:
        view.release()


def _describe(data_dir: Path) -> dict[str, int]:
    database = open_log_database(data_dir / LOG_DIR, read_only=True)
    log = RocksLogStore(database)
    hard_state = RocksHardStateStore(database)
    try:
        state = hard_state.load()
        return {
            "first_index": log.first_index,
            "last_index": log.last_index,
            "last_term": log.term_at(log.last_index) or 0,
            "log_snapshot_index": log.snapshot_index,
            "current_term": state.current_term,
            "last_applied": state.last_applied,
        }
    finally:
        log.close()
        hard_state.close()
        database.release()


def backup_data_dir(
    source: str | Path, dest: str | Path, *, attempts: int = 5, manifest: bool = True
) -> BackupReport:
    """Back up the data directory ``source`` (live or not) into the new directory ``dest``.

    ``dest`` must not exist (or be an empty directory). Raises ``BackupError`` if no
    consistent, verified copy could be made in ``attempts`` tries. Restoring is the same
    operation from the backup into a new data directory (``manifest=False``: a data dir
    needs no backup manifest).
    """
    src, target = Path(source), Path(dest)
    if not (src / LOG_DIR / "CURRENT").is_file():
        raise BackupError(f"{src}: not a raftlog data directory (no {LOG_DIR}/ store)")
    if target.exists() and (not target.is_dir() or any(target.iterdir())):
        raise BackupError(f"{target}: already exists and is not an empty directory")
    target.parent.mkdir(parents=True, exist_ok=True)
    work = target.parent / f".{target.name}.partial-{os.getpid()}"
    last_problem = "no attempt made"
    for attempt in range(1, attempts + 1):
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir()
        try:
            snapshot_index = _copy_snapshot(src, work / SNAPSHOT_DIR)
            keys, size = _copy_database(src / LOG_DIR, work / LOG_DIR)
            facts = _describe(work)
        except StorageError as exc:  # e.g. a file compacted away while the view opened
            last_problem = str(exc)
            time.sleep(0.05 * attempt)
            continue
        base = facts["log_snapshot_index"]
        if base > 0 and (snapshot_index is None or snapshot_index < base):
            last_problem = (
                f"the log was compacted to {base} past the copied snapshot "
                f"({snapshot_index}) while copying"
            )
            continue
        report = verify_data_dir(work)
        if not report.ok:
            shutil.rmtree(work, ignore_errors=True)
            raise BackupError(f"the copy does not verify: {'; '.join(report.problems[:3])}")
        result = BackupReport(
            source=str(src.resolve()),
            created_utc=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            first_index=facts["first_index"],
            last_index=facts["last_index"],
            last_term=facts["last_term"],
            current_term=facts["current_term"],
            last_applied=facts["last_applied"],
            snapshot_index=snapshot_index,
            keys=keys,
            bytes_copied=size,
            attempts=attempt,
        )
        if manifest:
            _write_manifest(work / MANIFEST, result)
        if target.exists():
            target.rmdir()
        os.rename(work, target)
        _fsync_path(target.parent, directory=True)
        return result
    shutil.rmtree(work, ignore_errors=True)
    raise BackupError(f"no consistent copy after {attempts} attempts: {last_problem}")


def _write_manifest(path: Path, report: BackupReport) -> None:
    with open(path, "w", encoding="utf-8") as out:
        json.dump(asdict(report), out, indent=2)
        out.write("\n")
        out.flush()
        os.fsync(out.fileno())
