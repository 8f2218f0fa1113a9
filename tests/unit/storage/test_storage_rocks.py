"""RocksDB-specific behaviour: O(1) open, read-only access, locking, one sync per append,
checksums on planted bad records and injected write errors."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from storage_helpers import batch, entry, rid

from raftlog.entry import EntryType, LogEntry
from raftlog.errors import StorageCorruptionError, StorageError
from raftlog.ids import make_request_id
from raftlog.storage import _records as rec
from raftlog.storage import failpoints
from raftlog.storage._rocksdb import RocksDatabase
from raftlog.storage.rocks import RocksLogStore, open_log_database, open_storage


@pytest.fixture
def failpoint_spec() -> Iterator[None]:
    yield
    failpoints.configure(None)


def test_open_reads_no_range(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = RocksLogStore.open(tmp_path / "db")
    for start in range(1, 10_001, 1000):
        log.append(start, batch(1, start, 1000))
    log.compact(500, 1)
    log.close()

    def no_scan(*_args: object) -> Iterator[bytes]:
        raise AssertionError("open must not iterate over a key range")

    monkeypatch.setattr(RocksDatabase, "values", no_scan)
    monkeypatch.setattr(RocksDatabase, "items", no_scan)
    log = RocksLogStore.open(tmp_path / "db")
    assert (log.first_index, log.last_index, log.term_at(10_000)) == (501, 10_000, 1)
    assert log.index_of_request(rid(9_999)) == 9_999
    log.close()


def test_one_synced_write_per_append(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = RocksLogStore.open(tmp_path / "db")
    log.append(1, batch(1, 1, 5))
    writes: list[bool] = []
    real_write = RocksDatabase.write

    def counting(
        self: RocksDatabase, batch_: object, sync: bool, what: str, skip: str = "log_sync"
    ) -> None:
        writes.append(sync)
        real_write(self, batch_, sync, what, skip)  # type: ignore[arg-type]

    monkeypatch.setattr(RocksDatabase, "write", counting)
    log.append(3, batch(2, 30, 64))  # truncation + 64 entries + request ids: one batch
    assert writes == [True]
    log.close()


def test_read_only_open_creates_nothing_and_refuses_writes(tmp_path: Path) -> None:
    with pytest.raises(StorageError, match="no such data directory"):
        open_storage(tmp_path / "missing", read_only=True)
    assert not (tmp_path / "missing").exists()
    (tmp_path / "empty").mkdir()
    with pytest.raises(StorageError, match="no raftlog store"):
        open_storage(tmp_path / "empty", read_only=True)
    assert list((tmp_path / "empty").iterdir()) == []

    log, hard_state, snaps = open_storage(tmp_path / "peer")
    log.append(1, batch(1, 1, 3))
    # A read-only open works while the peer holds the database open.
    ro_log, ro_hard, ro_snaps = open_storage(tmp_path / "peer", read_only=True)
    assert ro_log.entries(1, 4) == batch(1, 1, 3)
    with pytest.raises(StorageError, match="read-only"):
        ro_log.append(4, batch(1, 4, 1))
    with pytest.raises(StorageError, match="read-only"):
        ro_snaps.install(1, 1, b"x")
    for store in (ro_log, ro_hard, ro_snaps, log, hard_state, snaps):
        store.close()


def test_second_writer_is_refused(tmp_path: Path) -> None:
    log = RocksLogStore.open(tmp_path / "db")
    with pytest.raises(StorageError, match="lock"):
        RocksLogStore.open(tmp_path / "db")
    log.close()


@pytest.mark.parametrize(
    ("key", "make_bad"),
    [
        (rec.entry_key(3), lambda v: v[:-1] + bytes([v[-1] ^ 1])),  # bit flip in the data
        (rec.entry_key(3), lambda v: v[:10]),  # truncated record
        (rec.entry_key(3), lambda v: rec.seal(rec.entry_key(4), v[4:])),  # record of another key
    ],
)
def test_bad_entry_record_is_reported_with_its_index(
    tmp_path: Path, key: bytes, make_bad: object
) -> None:
    log = RocksLogStore.open(tmp_path / "db")
    log.append(1, batch(1, 1, 5))
    value = log.database.get(key, "test")
    assert value is not None
    log.database.raw_put_for_tests(key, make_bad(value))  # type: ignore[operator]
    for read in (
        lambda: log.entries(1, 6),
        lambda: log.raw_entries(3, 4),
        lambda: log.term_at(3),
    ):
        with pytest.raises(StorageCorruptionError, match="entry 3"):
            read()
    assert log.entries(4, 6) == batch(1, 4, 2)  # intact entries still read
    log.close()


def test_bad_last_entry_or_meta_fails_open(tmp_path: Path) -> None:
    path = tmp_path / "db"
    log = RocksLogStore.open(path)
    log.append(1, batch(1, 1, 5))
    log.database.raw_put_for_tests(rec.entry_key(5), b"garbage")
    log.close()
    with pytest.raises(StorageCorruptionError, match="entry 5"):
        RocksLogStore.open(path)
    database = open_log_database(path)
    database.raw_put_for_tests(rec.entry_key(5), rec.seal(rec.entry_key(5), entry(1, 5).to_bytes()))
    database.raw_put_for_tests(rec.META_KEY, rec.encode_meta(0, 0, 7))  # claims 2 more
    database.release()
    with pytest.raises(StorageCorruptionError, match="meta"):
        RocksLogStore.open(path)


def test_missing_record_inside_range(tmp_path: Path) -> None:
    log = RocksLogStore.open(tmp_path / "db")
    log.append(1, batch(1, 1, 5))
    log.database._db.delete(rec.entry_key(5))  # below the store: a lost record
    log.database._db.delete(rec.entry_key(3))
    with pytest.raises(StorageCorruptionError, match="entry 3"):
        log.entries(1, 5)
    with pytest.raises(StorageCorruptionError, match="entry 5"):
        log.entries(4, 6)
    log.close()


@pytest.mark.usefixtures("failpoint_spec")
def test_injected_write_error_leaves_store_consistent(tmp_path: Path) -> None:
    path = tmp_path / "peer"
    log, hard_state, snaps = open_storage(path)
    log.append(1, batch(1, 1, 4))
    snaps.install(2, 1, b"good")
    failpoints.configure("before_sync=error")
    with pytest.raises(StorageError, match="injected"):
        log.append(3, batch(2, 30, 3))
    with pytest.raises(StorageError, match="injected"):
        log.compact(3, 1)
    with pytest.raises(StorageError, match="injected"):
        snaps.install(4, 1, b"new")
    failpoints.configure(None)
    assert (log.last_index, log.snapshot_index) == (4, 0)
    assert log.entries(1, 5) == batch(1, 1, 4)
    assert log.index_of_request(rid(30)) is None
    assert snaps.read(0, 10) == b"good"
    log.append(5, batch(1, 5, 1))  # the store works on once the "disk" has room again
    for store in (log, hard_state, snaps):
        store.close()
    log, hard_state, snaps = open_storage(path)
    assert log.entries(1, 6) == batch(1, 1, 5)
    assert list(snaps.directory.iterdir()) == [snaps.path]  # no temp file left behind
    for store in (log, hard_state, snaps):
        store.close()


def test_failpoint_spec_parsing(failpoint_spec: None) -> None:
    failpoints.configure("after_append=sleep(1)@2, before_sync=error")
    assert failpoints.ENABLED
    failpoints.hit("after_append")  # first hit: not yet active
    with pytest.raises(StorageError):
        failpoints.hit("before_sync")
    failpoints.hit("unconfigured")
    with pytest.raises(ValueError, match="bad failpoint"):
        failpoints.configure("before_sync=explode")
    failpoints.configure("")
    assert not failpoints.ENABLED


def test_pruning_request_ids_leaves_one_range_tombstone_not_one_per_id(tmp_path: Path) -> None:
    """Pruned by-index keys go with one range delete. A point tombstone per key piled up at
    the front of the by-index prefix, and every later seek there (the next prune,
    ``oldest_request_index``) walked over all of them: loop stalls of up to 1.3 s with
    compaction on (issue #12). Only the id -> index keys (random keys) are point-deleted."""
    store, hard_state, snapshots = open_storage(tmp_path)
    try:
        old = [make_request_id(1000, b"abc", 1, n) for n in range(1, 201)]
        fresh = [make_request_id(5000, b"abc", 1, n) for n in range(1, 11)]
        store.append(1, [LogEntry(r, EntryType.STATE, 1, b"x") for r in old + fresh])
        deletes = "rocksdb.num-deletes-active-mem-table"
        before = store.database.property_int(deletes) or 0
        assert store.prune_expired_request_ids(2000 * 1000 + 60_000, 60_000) == 200
        assert (store.database.property_int(deletes) or 0) - before == 200  # not 400
        assert store.oldest_request_index() == 201
        assert store.index_of_request(old[0]) is None
        assert store.index_of_request(fresh[0]) == 201
    finally:
        store.close()
        hard_state.close()
        snapshots.close()


def test_a_shortening_overwrite_leaves_no_request_id_record_of_the_cut_suffix(
    tmp_path: Path,
) -> None:
    """Appending below the end replaces the suffix: the request ids of the cut entries go,
    both ways (id -> index and the by-index mirror), or pruning and
    ``oldest_request_index`` would read ids of entries that no longer exist."""
    store, hard_state, snapshots = open_storage(tmp_path)
    try:
        store.append(1, batch(1, 1, 6))
        store.append(3, batch(2, 100, 1))  # entries 3-6 cut; 3 is new
        assert store.last_index == 3
        found = {n: store.index_of_request(rid(n)) for n in (1, 2, 3, 4, 5, 6, 100)}
        assert found == {1: 1, 2: 2, 3: None, 4: None, 5: None, 6: None, 100: 3}
        mirrors = list(
            store.database.items(rec.REQUEST_BY_INDEX_PREFIX, rec.REQUEST_BY_INDEX_END, "ids")
        )
        assert [rec.key_index(key) for key, _ in mirrors] == [1, 2, 3]
        ids = list(store.database.items(rec.REQUEST_PREFIX, rec.REQUEST_END, "ids"))
        assert len(ids) == 3
    finally:
        store.close(), hard_state.close(), snapshots.close()


def test_compact_all_leaves_no_level0_tables_and_keeps_every_record(tmp_path: Path) -> None:
    """``bench/prefill.py`` compacts a bulk-written store before closing it, so that the
    peers it is measured with do not pay the load's compactions; nothing may be lost."""
    store, hard_state, snapshots = open_storage(tmp_path / "peer")
    try:
        # Three level-0 tables, one per flushed batch: below RocksDB's level-0 compaction
        # trigger (4), so no background compaction merges them before they are counted (with
        # four, one sometimes did on a loaded machine, and the count read 3).
        for first in range(1, 3001, 1000):
            store.append(first, batch(1, first, 1000))
            store.database._db.flush()
        assert store.database.property_int("rocksdb.num-files-at-level0") == 3
        store.database.compact_all()
        assert store.database.property_int("rocksdb.num-files-at-level0") == 0
        assert store.entries(1, 3001) == batch(1, 1, 3000)
    finally:
        store.close(), hard_state.close(), snapshots.close()
    ro_log, ro_hard, ro_snaps = open_storage(tmp_path / "peer", read_only=True)
    try:
        with pytest.raises(StorageError, match="read-only"):
            ro_log.database.compact_all()
    finally:
        ro_log.close(), ro_hard.close(), ro_snaps.close()
