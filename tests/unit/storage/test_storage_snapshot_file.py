"""FileSnapshotStore specifics: chunked receive, leftovers after a crash, failed installs."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from raftlog.errors import StorageError
from raftlog.storage import failpoints
from raftlog.storage.base import SnapshotMeta
from raftlog.storage.snapshot import HEADER_SIZE, FileSnapshotStore


@pytest.fixture
def store(tmp_path: Path) -> Iterator[FileSnapshotStore]:
    made = FileSnapshotStore(tmp_path / "snaps")
    yield made
    made.close()
    failpoints.configure(None)


def test_chunked_receive_and_read(store: FileSnapshotStore, tmp_path: Path) -> None:
    data = bytes(range(256)) * 1000
    chunks = [data[i : i + 65536] for i in range(0, len(data), 65536)]
    assert store.begin(7, 3, len(data)) == 0
    offset = 0
    for chunk in chunks:
        # a retransmitted chunk (InstallSnapshot debounce lost) must not be written twice
        first, duplicate = store.write_chunk(offset, chunk), store.write_chunk(offset, chunk)
        offset += len(chunk)
        assert (first, duplicate) == (offset, offset)
    assert store.begin(7, 3, len(data)) == len(data)  # continuing: nothing restarts
    assert store.finish() == SnapshotMeta(7, 3, len(data))
    assert store.read(1000, 5000) == data[1000:6000]
    assert store.read(len(data) - 1, 100) == data[-1:]
    reopened = FileSnapshotStore(tmp_path / "snaps")
    assert reopened.read(0, len(data)) == data
    assert reopened.verify() == SnapshotMeta(7, 3, len(data))
    reopened.close()
    assert store.install(9, 3, b"xyz") == SnapshotMeta(9, 3, 3)
    assert store.read(0, 10) == b"xyz"


def test_leftover_temp_files_are_removed(tmp_path: Path) -> None:
    directory = tmp_path / "snaps"
    directory.mkdir()
    (directory / "snapshot.bin.tmp").write_bytes(b"half an install")
    (directory / "receiving.tmp").write_bytes(b"half a transfer")
    store = FileSnapshotStore(directory)
    assert store.meta() is None
    assert list(directory.iterdir()) == []
    store.close()


@pytest.mark.parametrize("point", ["before_sync", "before_snapshot_rename"])
def test_failed_install_keeps_the_old_snapshot(store: FileSnapshotStore, point: str) -> None:
    store.install(3, 1, b"old data")
    failpoints.configure(f"{point}=error")
    with pytest.raises(StorageError, match="injected"):
        store.install(5, 2, b"new data")
    store.begin(6, 2, 3)
    store.write_chunk(0, b"abc")
    with pytest.raises(StorageError, match="injected"):
        store.finish()
    failpoints.configure(None)
    assert store.meta() == SnapshotMeta(3, 1, 8)
    assert store.read(0, 100) == b"old data"
    assert [p.name for p in store.directory.iterdir()] == ["snapshot.bin"]
    assert store.path.stat().st_size == HEADER_SIZE + 8


def test_read_arguments(store: FileSnapshotStore) -> None:
    store.install(1, 1, b"abc")
    with pytest.raises(ValueError, match="non-negative"):
        store.read(-1, 2)
    with pytest.raises(StorageError, match="without begin"):
        store.write_chunk(0, b"x")


def test_an_open_handle_keeps_serving_the_snapshot_it_opened(
    store: FileSnapshotStore, tmp_path: Path
) -> None:
    store.install(3, 1, b"first snapshot")
    other = FileSnapshotStore(tmp_path / "snaps")  # e.g. a tool's second handle
    other.install(4, 1, b"second snapshot")
    other.close()
    assert store.read(0, 5) == b"first"  # never bytes of another snapshot
