"""Directories that survive a power cut: ``fsync_dir`` and a durable ``mkdir -p``.

A new file or directory is only a name in its parent until the parent itself is fsynced
(fsync(2): "an explicit fsync() on a file descriptor for the directory is also needed").
RocksDB fsyncs its own directory for the files it creates, and the snapshot store fsyncs its
directory after every rename; the directories *holding* those (the data dir, ``log/``,
``snapshots/``) must be made durable the same way, or a power cut soon after a peer's first
start can take the whole store with it — every acknowledged write included (found by the
lazy-file-system power-cut tests, docs/reliability.md).
"""

from __future__ import annotations

import os
from pathlib import Path

from raftlog.storage import failpoints


def fsync_dir(path: Path, skip_point: str = "dir_sync") -> None:
    """Make ``path``'s entries (creations, renames, unlinks in it) durable. Failpoint
    ``before_sync``; the test-only bug switch ``<skip_point>=skip`` leaves it out."""
    if failpoints.ENABLED:
        failpoints.hit("before_sync")
        if failpoints.skipped(skip_point):
            return
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def make_dirs(path: Path) -> None:
    """``mkdir -p path`` whose result survives a power cut: each directory created here is
    made durable by an fsync of its parent (existing directories cost nothing)."""
    missing: list[Path] = []
    probe = path
    while not probe.is_dir():
        missing.append(probe)
        if probe.parent == probe:
            break
        probe = probe.parent
    for directory in reversed(missing):
        try:
            directory.mkdir()
        except FileExistsError:
            if not directory.is_dir():
                raise
        fsync_dir(directory.parent)
