"""Damage the files of a closed store — flipped bytes and truncated tails in RocksDB's SST and
WAL files and in the snapshot file — and check that opening or reading reports a
``StorageError`` (``StorageCorruptionError`` where it is a checksum failure) and never returns
data that differs from what was written."""

from __future__ import annotations

import os
import random
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

from raftlog.entry import LogEntry
from raftlog.errors import StorageCorruptionError, StorageError
from raftlog.storage.rocks import RocksLogStore, open_storage
from raftlog.storage.snapshot import FileSnapshotStore
from raftlog.storage.verify import verify_data_dir

ENTRIES = 2000


def make_entry(index: int) -> LogEntry:
    request_id = (1_700_000_000).to_bytes(4, "big") + index.to_bytes(8, "big")
    return LogEntry(request_id, 0, 1 + index // 500, os.urandom(8) + f"entry {index}".encode())


WRITER = textwrap.dedent(
    """
    import os, sys
    from raftlog.entry import LogEntry
    from raftlog.storage.rocks import RocksLogStore
    log = RocksLogStore.open(sys.argv[1])
    for start in range(1, int(sys.argv[2]) + 1, 100):
        log.append(start, [
            LogEntry((1_700_000_000).to_bytes(4, "big") + i.to_bytes(8, "big"), 0, 1,
                     f"entry {i}".encode().ljust(60, b"."))
            for i in range(start, start + 100)
        ])
    os._exit(0)  # like kill -9: no close, no flush, the data stays in the WAL
    """
)


@pytest.fixture(scope="module")
def flushed_store(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[LogEntry]]:
    """A closed store whose data sits in SST files (flushed), with its expected entries."""
    path = tmp_path_factory.mktemp("sst") / "db"
    log = RocksLogStore.open(path)
    written = [make_entry(i) for i in range(1, ENTRIES + 1)]
    for start in range(0, ENTRIES, 200):
        log.append(start + 1, written[start : start + 200])
    log.database._db.flush()
    log.close()
    assert list(path.glob("*.sst"))
    return path, written


@pytest.fixture(scope="module")
def wal_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store abandoned by a killed writer: all of its data is only in the WAL."""
    path = tmp_path_factory.mktemp("wal") / "db"
    subprocess.run([sys.executable, "-c", WRITER, str(path), "1000"], check=True)
    assert not list(path.glob("*.sst")) and list(path.glob("*.log"))
    return path


def damaged_copy(source: Path, target: Path, pattern: str, damage: Callable[[Path], None]) -> Path:
    shutil.copytree(source, target)
    files = sorted(target.glob(pattern), key=lambda p: p.stat().st_size)
    damage(files[-1])
    return target


def flip_byte(at: float) -> Callable[[Path], None]:
    def damage(path: Path) -> None:
        raw = bytearray(path.read_bytes())
        raw[int(len(raw) * at)] ^= 0x5A
        path.write_bytes(bytes(raw))

    return damage


def cut_tail(nbytes: int) -> Callable[[Path], None]:
    def damage(path: Path) -> None:
        os.truncate(path, max(0, path.stat().st_size - nbytes))

    return damage


def read_all_or_error(path: Path) -> list[tuple[LogEntry, int | None]] | StorageError:
    """Every entry with the index its request id maps to, or the storage error raised (at
    open or on read)."""
    try:
        log = RocksLogStore.open(path)
    except StorageError as exc:
        return exc
    try:
        entries = log.entries(log.first_index, log.last_index + 1)
        return [(e, log.index_of_request(e.request_id)) for e in entries]
    except StorageError as exc:
        return exc
    finally:
        log.close()


def expected(written: list[LogEntry]) -> list[tuple[LogEntry, int | None]]:
    return [(e, index) for index, e in enumerate(written, start=1)]


@pytest.mark.parametrize("at", [0.05, 0.2, 0.35, 0.5, 0.65, 0.8, 0.9])
def test_flipped_byte_in_sst_is_detected(
    flushed_store: tuple[Path, list[LogEntry]], tmp_path: Path, at: float
) -> None:
    source, written = flushed_store
    path = damaged_copy(source, tmp_path / "db", "*.sst", flip_byte(at))
    outcome = read_all_or_error(path)
    if isinstance(outcome, StorageError):
        assert "Corruption" in str(outcome) or "checksum" in str(outcome), outcome
        assert not verify_ok(path)
    else:  # the flip hit bytes no read depends on (e.g. statistics): data must be intact
        assert outcome == expected(written)


def verify_ok(db_path: Path) -> bool:
    data_dir = db_path.parent
    if db_path.name != "log":
        shutil.move(db_path, data_dir / "log")
    try:
        return verify_data_dir(data_dir).ok
    except StorageError:
        return False


def test_sst_data_block_flips_are_reported_by_index_reads(
    flushed_store: tuple[Path, list[LogEntry]], tmp_path: Path
) -> None:
    """Many random flips inside the data blocks: never garbage, and mostly detected."""
    source, written = flushed_store
    rng = random.Random(7)
    detected = 0
    for attempt in range(20):
        path = damaged_copy(
            source, tmp_path / f"db{attempt}", "*.sst", flip_byte(rng.uniform(0.02, 0.7))
        )
        outcome = read_all_or_error(path)
        if isinstance(outcome, StorageError):
            detected += 1
        else:
            assert outcome == expected(written)
    assert detected >= 15


def test_truncated_sst_fails_to_open_or_read(
    flushed_store: tuple[Path, list[LogEntry]], tmp_path: Path
) -> None:
    source, _ = flushed_store
    path = damaged_copy(source, tmp_path / "db", "*.sst", cut_tail(100))
    assert isinstance(read_all_or_error(path), StorageError)


@pytest.mark.parametrize("at", [0.1, 0.5, 0.9, 0.999])
def test_flipped_byte_in_wal_refuses_to_open(wal_store: Path, tmp_path: Path, at: float) -> None:
    path = damaged_copy(wal_store, tmp_path / "db", "*.log", flip_byte(at))
    with pytest.raises(StorageCorruptionError, match="Corruption"):
        RocksLogStore.open(path)


@pytest.mark.parametrize("nbytes", [1, 30, 500, 5000])
def test_truncated_wal_tail_reopens_as_a_clean_prefix(
    wal_store: Path, tmp_path: Path, nbytes: int
) -> None:
    """A torn final WAL record is what an unfinished (never acknowledged) write leaves; it is
    dropped whole: the store reopens as a batch-aligned prefix, every record intact."""
    path = damaged_copy(wal_store, tmp_path / "db", "*.log", cut_tail(nbytes))
    log = RocksLogStore.open(path)
    try:
        assert log.last_index % 100 == 0 and 0 < log.last_index < 1000
        entries = log.entries(1, log.last_index + 1)
        assert [e.data.rstrip(b".") for e in entries] == [
            f"entry {i}".encode() for i in range(1, log.last_index + 1)
        ]
        assert log.index_of_request(entries[-1].request_id) == log.last_index
        assert log.index_of_request(make_entry(log.last_index + 1).request_id) is None
    finally:
        log.close()


@pytest.mark.parametrize(
    "damage",
    [flip_byte(0.0), flip_byte(0.5), flip_byte(0.999), cut_tail(1), cut_tail(10_000)],
    ids=["header", "middle", "last-byte", "cut-1", "cut-all"],
)
def test_damaged_snapshot_is_refused(tmp_path: Path, damage: Callable[[Path], None]) -> None:
    store = FileSnapshotStore(tmp_path / "snapshots")
    store.install(10, 2, os.urandom(5000))
    store.close()
    damage(tmp_path / "snapshots" / "snapshot.bin")
    with pytest.raises(StorageCorruptionError, match="snapshot"):
        FileSnapshotStore(tmp_path / "snapshots")
    with pytest.raises(StorageCorruptionError):
        open_storage(tmp_path)  # the whole peer refuses to start on a bad snapshot


def test_verify_finds_damage_a_plain_open_misses(
    flushed_store: tuple[Path, list[LogEntry]], tmp_path: Path
) -> None:
    """Opening touches only the meta and boundary records; verify reads everything."""
    source, _ = flushed_store
    data_dir = tmp_path / "peer"
    data_dir.mkdir()
    damaged_copy(source, data_dir / "log", "*.sst", flip_byte(0.3))
    report = verify_data_dir(data_dir)
    assert not report.ok
    assert any("Corruption" in p or "checksum" in p for p in report.problems)
