"""The meta and request-id records in column families of their own
(``_records.FAMILY_RANGES``), and the upgrade of a store written before them -- with no
families at all, or with the request-id families only: every record in exactly one place
after any crash, the same answers before and after, read-only tools refusing a half-moved
store."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import pytest
from storage_helpers import batch

from raftlog.errors import StorageError
from raftlog.storage import _records as rec
from raftlog.storage import _rocksdb_open
from raftlog.storage._rocksdb import RocksDatabase
from raftlog.storage.base import HardState
from raftlog.storage.hard_state import RocksHardStateStore
from raftlog.storage.rocks import RocksLogStore, open_log_database
from raftlog.storage.verify import verify_data_dir

ENTRIES = 300
HARD = HardState(current_term=3, voted_for="b", last_applied=120)
NO_FAMILIES: Mapping[str, tuple[bytes, bytes]] = {}
"""The layout before any family: every record in the default family."""
ID_FAMILIES_ONLY = {
    name: bounds for name, bounds in rec.FAMILY_RANGES.items() if name != rec.META_FAMILY
}
"""The layout before the meta family: the request ids in theirs, the ``m/`` records not."""
META_RECORDS = 2
"""``m/log`` and ``m/hard``."""


def _older_store(path: Path, families: Mapping[str, tuple[bytes, bytes]]) -> list[bytes]:
    """A log and hard state written in an older layout (a database opened with only the
    ``families`` of that layout hands the stores only those, so they write the rest into the
    default family). Its request ids."""
    database = RocksDatabase(path, families=families)
    log = RocksLogStore(database)
    hard = RocksHardStateStore(database)
    database.release()
    try:
        entries = batch(1, 1, ENTRIES)
        log.append(1, entries)
        log.compact(100, 1)  # ids of compacted entries stay (until pruned)
        hard.save(HARD)
        return [e.request_id for e in entries]
    finally:
        hard.close()
        log.close()


def _records_in_default(path: Path) -> int:
    """Records of the families' key ranges still in the default family."""
    database = RocksDatabase(path, read_only=True)
    try:
        return sum(
            1
            for lo, hi in rec.FAMILY_RANGES.values()
            for _ in database.items(lo, hi, "records left in the default family")
        )
    finally:
        database.release()


def _default_family_keys(path: Path) -> set[bytes]:
    """The first byte of every key the default family holds."""
    database = RocksDatabase(path, read_only=True)
    try:
        return {key[:1] for key, _ in database.items(b"", b"\xff", "the default family")}
    finally:
        database.release()


def test_new_stores_keep_only_entries_in_the_default_family(tmp_path: Path) -> None:
    """The entries' table files then hold consecutive keys only, and compactions move them
    down whole instead of rewriting them (docs/performance.md §3)."""
    database = open_log_database(tmp_path / "log")
    log = RocksLogStore(database)
    hard = RocksHardStateStore(database)
    database.release()
    try:
        entries = batch(1, 1, 50)
        log.append(1, entries)
        hard.save(HARD)
        assert log.indexes_of_requests([e.request_id for e in entries]) == list(range(1, 51))
        assert log.oldest_request_index() == 1
    finally:
        hard.close()
        log.close()
    assert _records_in_default(tmp_path / "log") == 0
    assert _default_family_keys(tmp_path / "log") == {rec.ENTRY_PREFIX}
    database = open_log_database(tmp_path / "log", read_only=True)
    log = RocksLogStore(database)
    hard = RocksHardStateStore(database)
    database.release()
    try:
        assert hard.load() == HARD
        assert log.last_index == 50
    finally:
        hard.close()
        log.close()


@pytest.mark.parametrize(
    ("families", "in_default"),
    [(NO_FAMILIES, 2 * ENTRIES + META_RECORDS), (ID_FAMILIES_ONLY, META_RECORDS)],
    ids=["before any family", "before the meta family"],
)
def test_an_older_store_is_moved_at_its_first_open_and_answers_the_same(
    tmp_path: Path, families: Mapping[str, tuple[bytes, bytes]], in_default: int
) -> None:
    path = tmp_path / "data" / "log"
    ids = _older_store(path, families)
    assert _records_in_default(path) == in_default
    database = open_log_database(path)
    log = RocksLogStore(database)
    hard = RocksHardStateStore(database)
    database.release()
    try:
        assert hard.load() == HARD
        assert log.indexes_of_requests(ids) == list(range(1, ENTRIES + 1))
        assert log.oldest_request_index() == 1
        assert log.first_index == 101 and log.last_index == ENTRIES
        assert log.prune_request_ids(51) == 50
        assert log.index_of_request(ids[49]) is None and log.index_of_request(ids[50]) == 51
        log.append(ENTRIES + 1, batch(1, ENTRIES + 1, 5))  # the meta record, in its family
        hard.save(HARD.with_applied(200))
    finally:
        hard.close()
        log.close()
    assert _records_in_default(path) == 0
    assert _default_family_keys(path) == {rec.ENTRY_PREFIX}
    report = verify_data_dir(tmp_path / "data", peer=False)
    assert report.ok, report
    assert report.request_ids == ENTRIES - 50 + 5
    reopened = RocksLogStore.open(path)
    try:
        assert (reopened.first_index, reopened.last_index) == (101, ENTRIES + 5)
    finally:
        reopened.close()


def test_a_move_cut_short_is_refused_read_only_and_finished_by_the_next_open(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "data" / "log"
    ids = _older_store(path, NO_FAMILIES)
    monkeypatch.setattr(_rocksdb_open, "MOVE_CHUNK", 64)
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
    # the families move in key order, each chunk whole: the meta records, then 64 request ids
    assert _records_in_default(path) == 2 * ENTRIES - 64
    with pytest.raises(StorageError, match="interrupted"):
        open_log_database(path, read_only=True)
    database = open_log_database(path)
    log = RocksLogStore(database)
    hard = RocksHardStateStore(database)
    database.release()
    try:
        assert hard.load() == HARD
        assert log.indexes_of_requests(ids) == list(range(1, ENTRIES + 1))
    finally:
        hard.close()
        log.close()
    assert _records_in_default(path) == 0
    assert verify_data_dir(tmp_path / "data", peer=False).ok


@pytest.mark.parametrize("families", [NO_FAMILIES, ID_FAMILIES_ONLY], ids=["none", "ids only"])
def test_a_read_only_view_of_an_older_store_reads_it_where_it_is(
    tmp_path: Path, families: Mapping[str, tuple[bytes, bytes]]
) -> None:
    """Tools inspecting a stopped peer that was never started with this version."""
    path = tmp_path / "data" / "log"
    ids = _older_store(path, families)
    before = _records_in_default(path)
    database = open_log_database(path, read_only=True)
    log = RocksLogStore(database)
    hard = RocksHardStateStore(database)
    database.release()
    try:
        assert log.indexes_of_requests(ids[:3]) == [1, 2, 3]
        assert log.oldest_request_index() == 1
        assert (log.first_index, log.last_index) == (101, ENTRIES)
        assert hard.load() == HARD
    finally:
        hard.close()
        log.close()
    assert _records_in_default(path) == before  # nothing moved, nothing written
    assert verify_data_dir(tmp_path / "data", peer=False).ok



def _filter_bytes(database: RocksDatabase) -> dict[str, int]:
    """The bloom-filter bytes of each family's table files, after a flush (the views are
    dropped on return: RocksDB closes only when nothing holds a family)."""
    views = {"default": database._db}  # the table files' properties: no public view
    views |= {name: database._db.get_column_family(name) for name in rec.FAMILY_RANGES}
    sizes = {}
    for name, view in views.items():
        view.flush()
        properties = view.property_value("rocksdb.aggregated-table-properties") or ""
        sizes[name] = int(properties.split("filter block size=")[1].split(";")[0])
    return sizes


def test_only_families_read_by_keys_they_may_not_hold_carry_bloom_filters(tmp_path: Path) -> None:
    """A filter costs ~1.25 bytes of memory per key while its table is open; it saves a search
    only for a key the family may not hold: the request ids (every new one is looked up) and
    the meta records, not the entries or the by-index mirrors (ranges, keys they hold)."""
    database = open_log_database(tmp_path / "log")
    log = RocksLogStore(database)
    database.release()
    try:
        log.append(1, batch(1, 1, 200))
        sizes = _filter_bytes(log.database)
    finally:
        log.close()
    assert all(size > 0 for name, size in sizes.items() if name not in rec.UNFILTERED_FAMILIES)
    assert {name for name, size in sizes.items() if size == 0} == rec.UNFILTERED_FAMILIES
    assert {"default", rec.MIRROR_FAMILY} == rec.UNFILTERED_FAMILIES
