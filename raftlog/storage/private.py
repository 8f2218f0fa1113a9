"""Data at rest is private to the peer's user: directories 0700, files 0600 (issue #25).

Why one module: the log, snapshots, hard state and topic index hold every record the
cluster stores, and four programs create or copy them -- the peer (its own files and the
RocksDB files it opens), ``raftlog-tool backup`` and ``restore``, and anything that opens a
data dir through ``raftlog.storage``. With the usual umask (022) every one of those came out
0755/0644, readable by any local user. RocksDB takes no file mode, so the process umask is
the only lever for its files (:func:`private_umask`); our own directories are also created
and, at start-up, tightened explicitly (:func:`tighten_tree`); ``raftlog-tool verify`` lists
whatever is still looser (:func:`loose_modes`).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Final

DIR_MODE: Final = 0o700
FILE_MODE: Final = 0o600
PRIVATE_UMASK: Final = 0o077
"""Nothing for group or others on anything the process creates."""
MAX_LISTED: Final = 20
"""Loose paths ``loose_modes`` lists (it counts the rest)."""


def private_umask() -> int:
    """Make every file and directory this process creates from now on private (RocksDB's
    too); returns the previous umask. Peers and the backup tool call it once at start."""
    return os.umask(PRIVATE_UMASK)


def _walk(root: Path) -> Iterator[tuple[Path, os.stat_result]]:
    """``root`` and everything under it (symlinks neither followed nor reported)."""
    try:
        yield root, root.lstat()
    except FileNotFoundError:
        return
    for directory, dirs, files in os.walk(root):
        for name in (*dirs, *files):
            path = Path(directory) / name
            try:
                info = path.lstat()
            except FileNotFoundError:  # a RocksDB file went away meanwhile
                continue
            if not stat.S_ISLNK(info.st_mode):
                yield path, info


def _wanted(info: os.stat_result) -> int:
    return DIR_MODE if stat.S_ISDIR(info.st_mode) else FILE_MODE


def tighten_tree(root: Path) -> int:
    """Remove every group/other permission under ``root`` (directories keep at most 0700,
    files 0600); returns how many paths changed. For a data dir written before this rule,
    and for what backup and restore copy."""
    changed = 0
    for path, info in _walk(root):
        mode = stat.S_IMODE(info.st_mode)
        if mode & ~_wanted(info):
            os.chmod(path, mode & _wanted(info))
            changed += 1
    return changed


def loose_modes(root: Path) -> tuple[list[str], int]:
    """What under ``root`` is readable, writable or searchable by group or others: up to
    ``MAX_LISTED`` one-line descriptions, and the total count."""
    found: list[str] = []
    count = 0
    for path, info in _walk(root):
        mode = stat.S_IMODE(info.st_mode)
        if mode & 0o077:
            count += 1
            if len(found) < MAX_LISTED:
                found.append(f"{path}: mode {mode:04o} (expected at most {_wanted(info):04o})")
    return found, count


__all__ = ["DIR_MODE", "FILE_MODE", "loose_modes", "private_umask", "tighten_tree"]
