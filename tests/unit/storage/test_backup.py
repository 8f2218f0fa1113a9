"""``backup_data_dir`` on closed data directories: what a backup holds, and that a copy
that is inconsistent or corrupt never appears at its destination.

(The live case — a running peer under write load and compaction — is
``tests/integration/peer/test_backup.py``.)"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from raftlog.entry import LogEntry
from raftlog.storage import _records as rec
from raftlog.storage.backup import MANIFEST, BackupError, backup_data_dir
from raftlog.storage.rocks import open_storage
from raftlog.storage.verify import verify_data_dir


def _entry(index: int) -> LogEntry:
    request_id = (1_700_000_000).to_bytes(4, "big") + index.to_bytes(8, "big")
    return LogEntry(request_id, 0, 1 + index // 100, f"entry {index}".encode())


def _data_dir(path: Path, entries: int = 300, compact_to: int | None = 120) -> Path:
    log, hard_state, snapshots = open_storage(path)
    try:
        log.append(1, [_entry(i) for i in range(1, entries + 1)])
        if compact_to is not None:
            term = log.term_at(compact_to)
            assert term is not None
            snapshots.install(compact_to, term, b"state as of %d" % compact_to)
            log.compact(compact_to, term)
    finally:
        log.close()
        hard_state.close()
        snapshots.close()
    return path


def _leftovers(parent: Path) -> list[str]:
    return sorted(p.name for p in parent.iterdir() if p.name.startswith("."))


def test_backup_holds_log_snapshot_and_manifest_and_restores(tmp_path: Path) -> None:
    source = _data_dir(tmp_path / "peer")
    report = backup_data_dir(source, tmp_path / "backup")
    assert (report.first_index, report.last_index, report.snapshot_index) == (121, 300, 120)
    assert report.last_term == 4 and report.attempts == 1
    assert json.loads((tmp_path / "backup" / MANIFEST).read_text())["last_index"] == 300
    assert verify_data_dir(tmp_path / "backup").ok

    restored = backup_data_dir(tmp_path / "backup", tmp_path / "restored", manifest=False)
    assert restored.last_index == 300
    assert not (tmp_path / "restored" / MANIFEST).exists()
    log, hard_state, snapshots = open_storage(tmp_path / "restored", read_only=True)
    try:
        assert (log.first_index, log.last_index) == (121, 300)
        assert list(log.entries(121, 301)) == [_entry(i) for i in range(121, 301)]
        meta = snapshots.meta()
        assert meta is not None and meta.index == 120
        assert snapshots.read(0, meta.size) == b"state as of 120"
    finally:
        log.close()
        hard_state.close()
        snapshots.close()
    assert _leftovers(tmp_path) == []


def test_backup_without_snapshot_of_an_uncompacted_log(tmp_path: Path) -> None:
    source = _data_dir(tmp_path / "peer", entries=50, compact_to=None)
    report = backup_data_dir(source, tmp_path / "backup")
    assert (report.first_index, report.last_index, report.snapshot_index) == (1, 50, None)
    assert verify_data_dir(tmp_path / "backup").ok


def test_a_log_compacted_past_the_copied_snapshot_is_never_a_backup(tmp_path: Path) -> None:
    """What a snapshot + compaction between the two copies looks like: the log's base is not
    covered by the snapshot that was copied. Retried, then refused; nothing left behind."""
    source = _data_dir(tmp_path / "peer")
    (source / "snapshots" / "snapshot.bin").unlink()
    with pytest.raises(BackupError, match="compacted to 120 past the copied snapshot"):
        backup_data_dir(source, tmp_path / "backup", attempts=2)
    assert not (tmp_path / "backup").exists()
    assert _leftovers(tmp_path) == []


def test_a_corrupt_source_gives_no_backup(tmp_path: Path) -> None:
    source = _data_dir(tmp_path / "peer", compact_to=None)
    log, hard_state, snapshots = open_storage(source)
    try:
        log.database.raw_put_for_tests(rec.entry_key(7), b"\x00\x00\x00\x00not an entry")
    finally:
        log.close()
        hard_state.close()
        snapshots.close()
    with pytest.raises(BackupError, match="does not verify"):
        backup_data_dir(source, tmp_path / "backup")
    assert not (tmp_path / "backup").exists()
    assert _leftovers(tmp_path) == []


def test_backup_never_overwrites(tmp_path: Path) -> None:
    source = _data_dir(tmp_path / "peer", entries=5, compact_to=None)
    (tmp_path / "backup").mkdir()
    (tmp_path / "backup" / "precious").write_text("keep me")
    with pytest.raises(BackupError, match="not an empty directory"):
        backup_data_dir(source, tmp_path / "backup")
    assert (tmp_path / "backup" / "precious").read_text() == "keep me"
    with pytest.raises(BackupError, match="not a raftlog data directory"):
        backup_data_dir(tmp_path / "backup", tmp_path / "elsewhere")
