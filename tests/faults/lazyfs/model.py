"""The lazy file system's model: a file tree in memory that knows what an fsync made durable.

Every file has its *live* bytes (what reads see) and its *synced* bytes (what survives a power
cut); every directory has its *live* entries and its *durable* entries. ``power_cut`` throws the
live state away and rebuilds it from the durable one, starting at the root: what was never made
durable is gone — unsynced writes, appends and truncations, files created, renamed or unlinked
in a directory that was not fsynced afterwards, whole directories whose entry in their parent
was never made durable.

What makes what durable (the rules applications may rely on; docs/reliability.md §power):

* ``fsync(file)`` / ``fdatasync(file)``: the file's data and size, i.e. its synced bytes
  become its live bytes. Not its name: a new file whose directory was not fsynced vanishes.
* ``fsync(dir)`` (``fsyncdir``): the directory's entries, i.e. the names it holds and which
  file or directory each names (creations, unlinks and both ends of a rename within it).
  Not the data of the files it names.

This is the POSIX minimum that Linux's fsync(2) documents ("an explicit fsync() on a file
descriptor for the directory is also needed"). ext4 in its default mode (data=ordered,
journal commit every 5 s) is more lenient — a file fsync commits the journal transaction that
also holds the file's directory entry, and any commit writes back the data of the files whose
metadata it carries — so an application that survives this model survives ext4's worst case
for everything modelled here. A cut with ``torn=rng`` also keeps a random prefix of each file's
unsynced appended bytes (a writeback that had begun), which ext4 can leave after a crash too.

Not modelled: hard links, symlinks, extended attributes, bit rot (the corruption tests flip
bits themselves), and the lies of disks that acknowledge a flush they did not do.
"""

from __future__ import annotations

import errno
import itertools
import os
import random
import stat
import time
from dataclasses import dataclass, field

_ids = itertools.count(2)


def _oserror(code: int, path: str) -> OSError:
    return OSError(code, os.strerror(code), path)


@dataclass(eq=False)
class File:
    """A regular file: live bytes, synced bytes, and where the live ones first differ."""

    mode: int = stat.S_IFREG | 0o644
    data: bytearray = field(default_factory=bytearray)
    synced: bytes = b""
    dirty_from: int = 0
    """Lowest offset written or truncated since the last fsync (``len(data)``: clean)."""
    mtime_ns: int = field(default_factory=time.time_ns)
    ino: int = field(default_factory=lambda: next(_ids))

    def write(self, offset: int, chunk: bytes) -> int:
        end = offset + len(chunk)
        if offset > len(self.data):
            self.data.extend(bytes(offset - len(self.data)))
        self.data[offset:end] = chunk
        self.dirty_from = min(self.dirty_from, offset)
        self.mtime_ns = time.time_ns()
        return len(chunk)

    def truncate(self, length: int) -> None:
        if length < len(self.data):
            del self.data[length:]
        else:
            self.data.extend(bytes(length - len(self.data)))
        self.dirty_from = min(self.dirty_from, length)
        self.mtime_ns = time.time_ns()

    def fsync(self) -> None:
        """Make the live bytes the synced ones (only the changed tail is copied)."""
        start = min(self.dirty_from, len(self.synced), len(self.data))
        self.synced = self.synced[:start] + bytes(self.data[start:])
        self.dirty_from = len(self.data)

    def unsynced(self) -> int:
        """Bytes a power cut would change (0: the live bytes are the synced ones)."""
        if self.dirty_from >= len(self.data) and len(self.data) == len(self.synced):
            return 0
        return max(len(self.data), len(self.synced)) - min(self.dirty_from, len(self.synced))

    def cut(self, torn: random.Random | None) -> None:
        keep = b""
        if torn is not None and self.dirty_from >= len(self.synced) < len(self.data):
            # only appended bytes beyond the synced size: a prefix of them may have been
            # written back before the cut (never bytes in the middle of the file)
            extra = len(self.data) - len(self.synced)
            keep = bytes(self.data[len(self.synced) : len(self.synced) + torn.randint(0, extra)])
        self.data = bytearray(self.synced + keep)
        self.dirty_from = len(self.data)


@dataclass(eq=False)
class Dir:
    """A directory: live entries (what lookups see) and durable entries (what a cut keeps)."""

    mode: int = stat.S_IFDIR | 0o755
    entries: dict[str, File | Dir] = field(default_factory=dict)
    durable: dict[str, File | Dir] = field(default_factory=dict)
    mtime_ns: int = field(default_factory=time.time_ns)
    ino: int = field(default_factory=lambda: next(_ids))

    def fsync(self) -> None:
        self.durable = dict(self.entries)

    def unsynced(self) -> int:
        """Entries a power cut would change."""
        names = self.entries.keys() | self.durable.keys()
        return sum(1 for n in names if self.entries.get(n) is not self.durable.get(n))


Node = File | Dir


class Tree:
    """The whole file system (paths are ``/``-separated, relative to the mount point)."""

    def __init__(self) -> None:
        self.root = Dir(ino=1)
        self.cuts = 0

    # -- lookups ---------------------------------------------------------------------------
    @staticmethod
    def _parts(path: str) -> list[str]:
        return [p for p in path.split("/") if p]

    def lookup(self, path: str) -> Node:
        node: Node = self.root
        for part in self._parts(path):
            if not isinstance(node, Dir):
                raise _oserror(errno.ENOTDIR, path)
            child = node.entries.get(part)
            if child is None:
                raise _oserror(errno.ENOENT, path)
            node = child
        return node

    def parent(self, path: str) -> tuple[Dir, str]:
        parts = self._parts(path)
        if not parts:
            raise _oserror(errno.EBUSY, path)
        node = self.lookup("/".join(parts[:-1]))
        if not isinstance(node, Dir):
            raise _oserror(errno.ENOTDIR, path)
        return node, parts[-1]

    def file(self, path: str) -> File:
        node = self.lookup(path)
        if isinstance(node, Dir):
            raise _oserror(errno.EISDIR, path)
        return node

    def dir(self, path: str) -> Dir:
        node = self.lookup(path)
        if not isinstance(node, Dir):
            raise _oserror(errno.ENOTDIR, path)
        return node

    # -- namespace changes (live only, until the directory is fsynced) ---------------------
    def create(self, path: str, mode: int = 0o644) -> File:
        parent, name = self.parent(path)
        existing = parent.entries.get(name)
        if isinstance(existing, File):
            return existing
        if existing is not None:
            raise _oserror(errno.EISDIR, path)
        node = File(mode=stat.S_IFREG | (mode & 0o7777))
        parent.entries[name] = node
        parent.mtime_ns = time.time_ns()
        return node

    def mkdir(self, path: str, mode: int = 0o755) -> Dir:
        parent, name = self.parent(path)
        if name in parent.entries:
            raise _oserror(errno.EEXIST, path)
        node = Dir(mode=stat.S_IFDIR | (mode & 0o7777))
        parent.entries[name] = node
        parent.mtime_ns = time.time_ns()
        return node

    def unlink(self, path: str) -> None:
        parent, name = self.parent(path)
        node = parent.entries.get(name)
        if node is None:
            raise _oserror(errno.ENOENT, path)
        if isinstance(node, Dir):
            raise _oserror(errno.EISDIR, path)
        del parent.entries[name]
        parent.mtime_ns = time.time_ns()

    def rmdir(self, path: str) -> None:
        parent, name = self.parent(path)
        node = parent.entries.get(name)
        if node is None:
            raise _oserror(errno.ENOENT, path)
        if not isinstance(node, Dir):
            raise _oserror(errno.ENOTDIR, path)
        if node.entries:
            raise _oserror(errno.ENOTEMPTY, path)
        del parent.entries[name]
        parent.mtime_ns = time.time_ns()

    def rename(self, old: str, new: str) -> None:
        old_parent, old_name = self.parent(old)
        node = old_parent.entries.get(old_name)
        if node is None:
            raise _oserror(errno.ENOENT, old)
        new_parent, new_name = self.parent(new)
        target = new_parent.entries.get(new_name)
        if target is node:
            return
        if isinstance(target, Dir):
            if not isinstance(node, Dir):
                raise _oserror(errno.EISDIR, new)
            if target.entries:
                raise _oserror(errno.ENOTEMPTY, new)
        elif target is not None and isinstance(node, Dir):
            raise _oserror(errno.ENOTDIR, new)
        if isinstance(node, Dir) and self._inside(new_parent, node):
            raise _oserror(errno.EINVAL, new)
        del old_parent.entries[old_name]
        new_parent.entries[new_name] = node
        old_parent.mtime = new_parent.mtime_ns = time.time_ns()

    @staticmethod
    def _inside(node: Dir, ancestor: Dir) -> bool:
        if node is ancestor:
            return True
        return any(isinstance(c, Dir) and Tree._inside(node, c) for c in ancestor.entries.values())

    # -- power -----------------------------------------------------------------------------
    def power_cut(self, torn: random.Random | None = None) -> None:
        """Drop everything not made durable (module docstring); ``torn``: also keep a random
        prefix of each file's unsynced appends."""
        seen: set[int] = set()

        def restore(directory: Dir) -> None:
            directory.entries = dict(directory.durable)
            for node in directory.entries.values():
                if id(node) in seen:
                    continue
                seen.add(id(node))
                if isinstance(node, Dir):
                    restore(node)
                else:
                    node.cut(torn)

        restore(self.root)
        self.cuts += 1

    def sync_all(self) -> None:
        """Make everything live durable (a clean shutdown's ``sync``)."""

        def walk(directory: Dir) -> None:
            directory.fsync()
            for node in directory.entries.values():
                if isinstance(node, Dir):
                    walk(node)
                else:
                    node.fsync()

        walk(self.root)

    def unsynced(self) -> dict[str, int]:
        """What a cut would drop now: changed bytes and directory entries."""
        out = {"bytes": 0, "entries": 0, "files": 0}

        def walk(directory: Dir) -> None:
            out["entries"] += directory.unsynced()
            for node in directory.entries.values():
                if isinstance(node, Dir):
                    walk(node)
                else:
                    out["files"] += 1
                    out["bytes"] += node.unsynced()

        walk(self.root)
        return out
