"""Snapshot integrity: a log compacted past its snapshot is missing entries (the peer refuses
to start on it and ``raftlog-tool verify`` reports it; the snapshot-directory negative control
of the power-cut schedules is the end-to-end version), and a snapshot that goes bad under a
running peer is never streamed whole."""

from __future__ import annotations

from pathlib import Path

import pytest

from raftlog.entry import EntryType, LogEntry
from raftlog.errors import StorageCorruptionError
from raftlog.storage.rocks import SNAPSHOT_DIR, open_storage
from raftlog.storage.snapshot import (
    HEADER_SIZE,
    SNAPSHOT_FILE,
    FileSnapshotStore,
    check_snapshot_covers_log,
)
from raftlog.storage.verify import verify_data_dir


def compacted_store(root: Path) -> None:
    log, hard_state, snapshots = open_storage(root)
    try:
        entries = [LogEntry(bytes(11) + bytes([i]), EntryType.STATE, 1, b"x") for i in range(6)]
        log.append(1, entries)
        snapshots.install(4, 1, b"state at 4")
        log.compact(4, 1)
        check_snapshot_covers_log(root, log, snapshots)  # consistent: nothing to say
    finally:
        log.close()
        hard_state.close()
        snapshots.close()


def check(root: Path) -> None:
    log, hard_state, snapshots = open_storage(root)
    try:
        check_snapshot_covers_log(root, log, snapshots)
    finally:
        log.close()
        hard_state.close()
        snapshots.close()


def test_a_lost_snapshot_is_refused_and_reported(tmp_path: Path) -> None:
    compacted_store(tmp_path)
    check(tmp_path)
    assert verify_data_dir(tmp_path).ok
    (tmp_path / SNAPSHOT_DIR / SNAPSHOT_FILE).unlink()
    with pytest.raises(StorageCorruptionError, match="compacted up to 4 but there is no snapshot"):
        check(tmp_path)
    report = verify_data_dir(tmp_path)
    assert not report.ok
    assert "compacted up to 4" in report.problems[0]


def test_an_older_snapshot_is_refused(tmp_path: Path) -> None:
    compacted_store(tmp_path)
    log, hard_state, snapshots = open_storage(tmp_path)
    snapshots.install(2, 1, b"state at 2")  # what a lost rename leaves behind
    log.close()
    hard_state.close()
    snapshots.close()
    with pytest.raises(StorageCorruptionError, match="a snapshot only up to 2"):
        check(tmp_path)


def test_a_snapshot_corrupted_under_a_running_peer_is_never_handed_out_whole(
    tmp_path: Path,
) -> None:
    """A bit flip after the store opened the file: chunks before the end may be read, the
    read that completes the transfer raises instead of returning the last chunk."""
    store = FileSnapshotStore(tmp_path)
    data = bytes(range(256)) * 64
    store.install(9, 2, data)
    assert store.read(0, len(data)) == data  # clean: whole reads pass the check
    with open(store.path, "r+b") as f:  # flip one bit in the middle of the data
        f.seek(HEADER_SIZE + 5000)
        byte = f.read(1)[0]
        f.seek(HEADER_SIZE + 5000)
        f.write(bytes([byte ^ 0x10]))
    assert len(store.read(0, 4096)) == 4096  # not the end: no check
    with pytest.raises(StorageCorruptionError, match="checksum mismatch"):
        store.read(4096, len(data))
    store.close()
    with pytest.raises(StorageCorruptionError):  # and a restart refuses it at once
        FileSnapshotStore(tmp_path)
