"""The lazy file system as a FUSE process: ``python -m faults.lazyfs MOUNTPOINT CONTROL``.

Serves ``model.Tree`` through libfuse 3 (the ``mfusepy`` binding) in the foreground until
unmounted. ``CONTROL`` is a Unix socket taking one-line commands, each answered by one JSON
line (``faults.lazyfs.mount.LazyMount`` speaks it):

* ``cut`` — power cut: drop everything not durable (``model`` docstring); ``cut SEED`` also
  keeps a random prefix of unsynced appends (a writeback that had begun), chosen by SEED;
* ``stats`` — operation counts and what a cut would drop now;
* ``sync`` — make everything durable (what a clean shutdown's ``sync`` would do).

The kernel must not remember anything a cut can take back, so the mount disables its caches:
``direct_io`` (no page cache: every read and write comes here), zero attribute, entry and
negative timeouts, and ``hard_remove`` (an unlinked open file is not renamed to a hidden name,
which would be a rename of our own through the tree).
"""

from __future__ import annotations

import errno
import json
import os
import random
import socket
import stat
import sys
import threading
from collections import Counter
from typing import Any

import mfusepy

from faults.lazyfs.model import Dir, File, Node, Tree

FALLOC_FL_KEEP_SIZE = 0x01


class LazyOperations(mfusepy.Operations):
    """FUSE operations over one ``Tree``, serialised by one mutex (the model is not
    thread-safe and every operation is short). Never name an attribute after an operation
    (``lock``, ``flush``...): mfusepy would register it as one."""

    use_ns = True

    def __init__(self) -> None:
        self.tree = Tree()
        self._mutex = threading.Lock()
        self.handles: dict[int, Node] = {}
        self.next_handle = 1
        self.counts: Counter[str] = Counter()

    # -- helpers ---------------------------------------------------------------------------
    def _handle(self, node: Node) -> int:
        fh = self.next_handle
        self.next_handle += 1
        self.handles[fh] = node
        return fh

    def _file(self, path: str | None, fh: int | None) -> File:
        node = self.handles.get(fh) if fh else None
        if node is None:
            if path is None:
                raise OSError(errno.EBADF, "stale handle (after a power cut)")
            node = self.tree.lookup(path)
        if isinstance(node, Dir):
            raise OSError(errno.EISDIR, path or "")
        return node

    @staticmethod
    def _attrs(node: Node) -> dict[str, Any]:
        size = len(node.data) if isinstance(node, File) else 4096
        return {
            "st_mode": node.mode,
            "st_ino": node.ino,
            "st_nlink": 2 if isinstance(node, Dir) else 1,
            "st_size": size,
            "st_blocks": (size + 511) // 512,
            "st_uid": os.getuid(),
            "st_gid": os.getgid(),
            "st_atime": node.mtime_ns,
            "st_mtime": node.mtime_ns,
            "st_ctime": node.mtime_ns,
        }

    # -- metadata --------------------------------------------------------------------------
    def getattr(self, path: str, fh: int | None = None) -> dict[str, Any]:
        with self._mutex:
            node = self.handles.get(fh) if fh else None
            return self._attrs(node if node is not None else self.tree.lookup(path))

    def readdir(self, path: str, fh: int) -> list[tuple[str, dict[str, int], int]]:
        # with use_ino every entry needs its inode number: the kernel hides entries of ino 0
        with self._mutex:
            directory = self.tree.dir(path)
            own = {"st_mode": directory.mode, "st_ino": directory.ino}
            named = [
                (n, {"st_mode": c.mode, "st_ino": c.ino}, 0) for n, c in directory.entries.items()
            ]
            return [(".", own, 0), ("..", own, 0), *named]

    def statfs(self, path: str) -> dict[str, int]:
        blocks = 1 << 24  # 64 GiB of 4 KiB blocks: never the limit of a test
        return {
            "f_bsize": 4096,
            "f_frsize": 4096,
            "f_blocks": blocks,
            "f_bfree": blocks,
            "f_bavail": blocks,
            "f_files": 1 << 20,
            "f_ffree": 1 << 20,
            "f_namemax": 255,
        }

    def chmod(self, path: str, mode: int) -> int:
        with self._mutex:
            node = self.tree.lookup(path)
            node.mode = stat.S_IFMT(node.mode) | (mode & 0o7777)
        return 0

    def chown(self, path: str, uid: int, gid: int) -> int:
        return 0

    def utimens(self, path: str, times: tuple[int, int] | None = None) -> int:
        return 0

    # -- namespace -------------------------------------------------------------------------
    def create(self, path: str, mode: int, flags: int = 0) -> int:
        with self._mutex:
            self.counts["create"] += 1
            node = self.tree.create(path, mode)
            if flags & os.O_TRUNC:
                node.truncate(0)
            return self._handle(node)

    def mkdir(self, path: str, mode: int) -> int:
        with self._mutex:
            self.counts["mkdir"] += 1
            self.tree.mkdir(path, mode)
        return 0

    def unlink(self, path: str) -> int:
        with self._mutex:
            self.counts["unlink"] += 1
            self.tree.unlink(path)
        return 0

    def rmdir(self, path: str) -> int:
        with self._mutex:
            self.tree.rmdir(path)
        return 0

    def rename(self, old: str, new: str) -> int:
        with self._mutex:
            self.counts["rename"] += 1
            self.tree.rename(old, new)
        return 0

    def link(self, target: str, source: str) -> int:
        raise OSError(errno.EPERM, "hard links are not modelled")

    def symlink(self, target: str, source: str) -> int:
        raise OSError(errno.EPERM, "symlinks are not modelled")

    # -- files -----------------------------------------------------------------------------
    def open(self, path: str, flags: int) -> int:
        with self._mutex:
            node = self.tree.file(path)
            if flags & os.O_TRUNC:
                node.truncate(0)
            return self._handle(node)

    def release(self, path: str | None, fh: int) -> int:
        with self._mutex:
            self.handles.pop(fh, None)
        return 0

    def read(self, path: str | None, size: int, offset: int, fh: int) -> bytes:
        with self._mutex:
            return bytes(self._file(path, fh).data[offset : offset + size])

    def write(self, path: str | None, data: bytes, offset: int, fh: int) -> int:
        with self._mutex:
            self.counts["write"] += 1
            return self._file(path, fh).write(offset, data)

    def truncate(self, path: str | None, length: int, fh: int | None = None) -> int:
        with self._mutex:
            self.counts["truncate"] += 1
            self._file(path, fh).truncate(length)
        return 0

    def fallocate(self, path: str | None, mode: int, offset: int, size: int, fh: int) -> int:
        with self._mutex:
            node = self._file(path, fh)
            if mode & ~FALLOC_FL_KEEP_SIZE:
                raise OSError(errno.EOPNOTSUPP, "only plain and KEEP_SIZE fallocate")
            if not mode & FALLOC_FL_KEEP_SIZE and offset + size > len(node.data):
                node.truncate(offset + size)
        return 0

    def flush(self, path: str | None, fh: int) -> int:
        return 0  # close(2) makes nothing durable

    def fsync(self, path: str | None, datasync: int, fh: int) -> int:
        with self._mutex:
            self.counts["fsync"] += 1
            self._file(path, fh).fsync()
        return 0

    def opendir(self, path: str) -> int:
        return 0

    def fsyncdir(self, path: str | None, datasync: int, fh: int) -> int:
        with self._mutex:
            self.counts["fsyncdir"] += 1
            if path is not None:
                self.tree.dir(path).fsync()
        return 0

    # -- control ---------------------------------------------------------------------------
    def command(self, line: str) -> dict[str, Any]:
        words = line.split()
        with self._mutex:
            if words[:1] == ["cut"]:
                torn = random.Random(int(words[1])) if len(words) > 1 else None
                dropped = self.tree.unsynced()
                self.tree.power_cut(torn)
                self.handles.clear()  # every open file died with the power
                return {"ok": True, "dropped": dropped, "cuts": self.tree.cuts}
            if words[:1] == ["sync"]:
                self.tree.sync_all()
                return {"ok": True}
            if words[:1] == ["stats"]:
                return {"ok": True, "counts": dict(self.counts), "unsynced": self.tree.unsynced()}
        return {"ok": False, "error": f"unknown command {line!r}"}


def serve_control(ops: LazyOperations, path: str) -> None:
    """Answer control commands on the Unix socket ``path`` (one client at a time)."""
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    server.listen(4)

    def loop() -> None:
        while True:
            conn, _ = server.accept()
            with conn, conn.makefile("rw") as stream:
                for line in stream:
                    stream.write(json.dumps(ops.command(line.strip())) + "\n")
                    stream.flush()

    threading.Thread(target=loop, name="lazyfs-control", daemon=True).start()


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python -m faults.lazyfs MOUNTPOINT CONTROL_SOCKET", file=sys.stderr)
        return 2
    mountpoint, control = argv
    ops = LazyOperations()
    serve_control(ops, control)
    mfusepy.FUSE(
        ops,
        mountpoint,
        foreground=True,
        nothreads=False,
        fsname="lazyfs",
        hard_remove=True,
        use_ino=True,
        direct_io=True,
        attr_timeout=0,
        entry_timeout=0,
        negative_timeout=0,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
