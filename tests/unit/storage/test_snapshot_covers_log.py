"""A log compacted past its snapshot is missing entries: the peer refuses to start on it and
``raftlog-tool verify`` reports it (the snapshot-directory negative control of the power-cut
schedules is the end-to-end version)."""

from __future__ import annotations

from pathlib import Path

import pytest

from raftlog.entry import EntryType, LogEntry
from raftlog.errors import StorageCorruptionError
from raftlog.storage.rocks import SNAPSHOT_DIR, check_snapshot_covers_log, open_storage
from raftlog.storage.snapshot import SNAPSHOT_FILE
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
