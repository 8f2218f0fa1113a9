"""The lazy file system itself: what a power cut keeps and drops, through the real FUSE mount
(``faults.lazyfs``), and that the peer's stores come back from one with every synced write."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from faults.lazyfs.mount import LazyMount, require_fuse


@pytest.fixture
def lazy(tmp_path: Path) -> Iterator[LazyMount]:
    require_fuse()
    with LazyMount(tmp_path / "mnt") as mount:
        yield mount


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write(path: Path, data: bytes, *, sync: bool, mode: str = "wb") -> None:
    with open(path, mode) as f:
        f.write(data)
        f.flush()
        if sync:
            os.fsync(f.fileno())


def test_cut_drops_unsynced_appends_and_keeps_synced_ones(lazy: LazyMount) -> None:
    root = lazy.point
    write(root / "wal", b"synced", sync=True)
    fsync_dir(root)
    write(root / "wal", b"+lost", sync=False, mode="ab")
    assert (root / "wal").read_bytes() == b"synced+lost"
    dropped = lazy.power_cut()["dropped"]
    assert dropped["bytes"] == 5
    assert (root / "wal").read_bytes() == b"synced"


def test_fdatasync_is_enough_for_data(lazy: LazyMount) -> None:
    root = lazy.point
    fd = os.open(root / "f", os.O_WRONLY | os.O_CREAT, 0o644)
    os.write(fd, b"abc")
    os.fdatasync(fd)
    os.close(fd)
    fsync_dir(root)
    lazy.power_cut()
    assert (root / "f").read_bytes() == b"abc"


def test_unsynced_truncation_and_overwrite_come_back(lazy: LazyMount) -> None:
    root = lazy.point
    write(root / "f", b"0123456789", sync=True)
    fsync_dir(root)
    with open(root / "f", "r+b") as f:
        f.write(b"XY")
        f.truncate(4)
    assert (root / "f").read_bytes() == b"XY23"
    lazy.power_cut()
    assert (root / "f").read_bytes() == b"0123456789"


def test_new_file_needs_its_directory_fsynced(lazy: LazyMount) -> None:
    root = lazy.point
    write(root / "orphan", b"data", sync=True)  # data durable, its name is not
    write(root / "kept", b"data", sync=True)
    fsync_dir(root)
    write(root / "late", b"data", sync=True)
    lazy.power_cut()
    assert sorted(os.listdir(root)) == ["kept", "orphan"]
    # the same again, without the directory fsync at all
    write(root / "nameless", b"x", sync=True)
    lazy.power_cut()
    assert "nameless" not in os.listdir(root)


def test_rename_is_durable_only_after_the_directory_fsync(lazy: LazyMount) -> None:
    root = lazy.point
    write(root / "current", b"old", sync=True)
    fsync_dir(root)
    write(root / "tmp", b"new", sync=True)
    os.replace(root / "tmp", root / "current")
    assert (root / "current").read_bytes() == b"new"
    lazy.power_cut()
    assert (root / "current").read_bytes() == b"old"
    assert "tmp" not in os.listdir(root)  # its creation was never made durable either
    write(root / "tmp", b"new", sync=True)
    os.replace(root / "tmp", root / "current")
    fsync_dir(root)
    lazy.power_cut()
    assert (root / "current").read_bytes() == b"new"
    assert os.listdir(root) == ["current"]


def test_unlink_comes_back_without_the_directory_fsync(lazy: LazyMount) -> None:
    root = lazy.point
    write(root / "f", b"keep", sync=True)
    fsync_dir(root)
    (root / "f").unlink()
    lazy.power_cut()
    assert (root / "f").read_bytes() == b"keep"


def test_directories_and_their_contents(lazy: LazyMount) -> None:
    root = lazy.point
    (root / "d").mkdir()
    write(root / "d" / "f", b"x", sync=True)
    fsync_dir(root / "d")  # d's entries are durable, but d itself is not in root yet
    lazy.power_cut()
    assert not (root / "d").exists()
    (root / "d").mkdir()
    write(root / "d" / "f", b"x", sync=True)
    fsync_dir(root / "d")
    fsync_dir(root)
    lazy.power_cut()
    assert (root / "d" / "f").read_bytes() == b"x"


def test_torn_cut_keeps_a_prefix_of_unsynced_appends(lazy: LazyMount) -> None:
    root = lazy.point
    write(root / "f", b"base", sync=True)
    fsync_dir(root)
    kept = set()
    for seed in range(8):
        write(root / "f", b"0123456789", sync=False, mode="ab")
        lazy.power_cut(torn_seed=seed)
        data = (root / "f").read_bytes()
        assert data == b"base" + b"0123456789"[: len(data) - 4]
        kept.add(len(data))
        with open(root / "f", "r+b") as f:
            f.truncate(4)
            os.fsync(f.fileno())
    assert len(kept) > 1  # prefixes of different lengths, not always all or nothing
