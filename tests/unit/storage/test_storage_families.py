"""The request-id records in column families of their own (``_records.FAMILY_RANGES``), and
the upgrade of a store written before them: every record in exactly one place after any
crash, the same answers before and after, read-only tools refusing a half-moved store."""

from __future__ import annotations

from pathlib import Path

import pytest
from storage_helpers import batch

from raftlog.errors import StorageError
from raftlog.storage import _records as rec
from raftlog.storage import _rocksdb
from raftlog.storage._rocksdb import RocksDatabase
from raftlog.storage.rocks import RocksLogStore, open_log_database
from raftlog.storage.verify import verify_data_dir

ENTRIES = 300


def _old_layout_store(path: Path) -> list[bytes]:
    """A log written as before the families: every record in the default family (a database
    opened without them hands the store no family, so it writes there). Its request ids."""
    database = RocksDatabase(path)
    log = RocksLogStore(database)
    database.release()
    try:
        entries = batch(1, 1, ENTRIES)
        log.append(1, entries)
        log.compact(100, 1)  # ids of compacted entries stay (until pruned)
        return [e.request_id for e in entries]
    finally:
        log.close()


def _records_in_default(path: Path) -> int:
    database = RocksDatabase(path, read_only=True)
    try:
        return sum(
            1
            for lo, hi in rec.FAMILY_RANGES.values()
            for _ in database.items(lo, hi, "records left in the default family")
        )
    finally:
        database.release()


def test_new_stores_keep_request_ids_in_their_families(tmp_path: Path) -> None:
    log = RocksLogStore.open(tmp_path / "log")
    try:
        entries = batch(1, 1, 50)
        log.append(1, entries)
        assert log.indexes_of_requests([e.request_id for e in entries]) == list(range(1, 51))
        assert log.oldest_request_index() == 1
    finally:
        log.close()
    assert _records_in_default(tmp_path / "log") == 0


def test_an_older_store_is_moved_at_its_first_open_and_answers_the_same(tmp_path: Path) -> None:
    path = tmp_path / "data" / "log"
    ids = _old_layout_store(path)
    assert _records_in_default(path) == 2 * ENTRIES
    log = RocksLogStore(open_log_database(path))
    log.database.release()
    try:
        assert log.indexes_of_requests(ids) == list(range(1, ENTRIES + 1))
        assert log.oldest_request_index() == 1
        assert log.first_index == 101 and log.last_index == ENTRIES
        assert log.prune_request_ids(51) == 50
        assert log.index_of_request(ids[49]) is None and log.index_of_request(ids[50]) == 51
    finally:
        log.close()
    assert _records_in_default(path) == 0
    report = verify_data_dir(tmp_path / "data", peer=False)
    assert report.ok, report
    assert report.request_ids == ENTRIES - 50


def test_a_move_cut_short_is_refused_read_only_and_finished_by_the_next_open(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "data" / "log"
    ids = _old_layout_store(path)
    monkeypatch.setattr(_rocksdb, "MOVE_CHUNK", 64)
    real_write = RocksDatabase.write
    writes = [0]

    def crash_after_two_chunks(self: RocksDatabase, *args: object, **kwargs: object) -> None:
        if writes[0] == 2:
            raise RuntimeError("power cut")
        writes[0] += 1
        real_write(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(RocksDatabase, "write", crash_after_two_chunks)
    with pytest.raises(RuntimeError, match="power cut"):
        open_log_database(path)
    monkeypatch.setattr(RocksDatabase, "write", real_write)
    assert _records_in_default(path) == 2 * ENTRIES - 2 * 64  # each chunk moved whole
    with pytest.raises(StorageError, match="interrupted"):
        open_log_database(path, read_only=True)
    log = RocksLogStore.open(path)
    try:
        assert log.indexes_of_requests(ids) == list(range(1, ENTRIES + 1))
    finally:
        log.close()
    assert _records_in_default(path) == 0
    assert verify_data_dir(tmp_path / "data", peer=False).ok


def test_a_read_only_view_of_an_older_store_reads_it_where_it_is(tmp_path: Path) -> None:
    """Tools inspecting a stopped peer that was never started with this version."""
    path = tmp_path / "data" / "log"
    ids = _old_layout_store(path)
    log = RocksLogStore.open(path, read_only=True)
    try:
        assert log.indexes_of_requests(ids[:3]) == [1, 2, 3]
        assert log.oldest_request_index() == 1
    finally:
        log.close()
    assert _records_in_default(path) == 2 * ENTRIES  # nothing moved, nothing written
    assert verify_data_dir(tmp_path / "data", peer=False).ok
