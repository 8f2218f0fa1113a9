"""Durability bugs the lazy file system found, each pinned by the power cut that shows it."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from faults.lazyfs.mount import LazyMount, require_fuse
from raftlog.entry import EntryType, LogEntry
from raftlog.storage.rocks import open_storage


@pytest.fixture
def lazy(tmp_path: Path) -> Iterator[LazyMount]:
    require_fuse()
    with LazyMount(tmp_path / "mnt") as mount:
        yield mount


def test_a_fresh_store_keeps_synced_entries_through_a_cut(lazy: LazyMount) -> None:
    """Regression: the stores created ``log/`` and ``snapshots/`` without fsyncing their
    parent, so a power cut after the first start dropped the whole store, synced entries
    included (every acknowledged write of a new cluster, if all peers lost power)."""
    data_dir = lazy.point / "peer"
    log, hard_state, snapshots = open_storage(data_dir)
    try:
        entries = [LogEntry(bytes(12), EntryType.STATE, 1, b"x%d" % i) for i in range(5)]
        log.append(1, entries)  # synced on return
    finally:
        log.close()
        hard_state.close()
        snapshots.close()
    os.sync()  # a kill -9 would keep everything; only the cut below can drop anything
    lazy.power_cut()
    log, hard_state, snapshots = open_storage(data_dir, read_only=True)
    try:
        assert log.last_index == 5
        assert [e.data for e in log.entries(1, 6)] == [b"x%d" % i for i in range(5)]
    finally:
        log.close()
        hard_state.close()
        snapshots.close()
