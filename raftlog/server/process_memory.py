"""Memory that comes back after a flood (issue #25): the allocator settings of a peer process.

Why: glibc serves a large allocation (a big ZeroMQ frame, the bytes of a big entry) with
its own ``mmap`` -- returned to the system on ``free`` -- only above a threshold that it
*raises* to the largest block freed so far (up to 32 MiB). After one burst of 10 MiB frames
every later one comes from the heap, and freed heap memory mostly stays with the process:
measured, a peer went 61 -> 250 MB under four 100 MB senders and stayed at 133 MB. Fixing
the threshold (``mallopt(M_MMAP_THRESHOLD)``, which also turns the raising off) keeps every
large block a mapping of its own; ``malloc_trim`` now and then returns the small-block
heap's free tail. Neither changes what the peer does, only where its memory goes.

Only on glibc (Linux); elsewhere these are no-ops.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import resource
from collections.abc import Callable
from typing import Any, Final

M_MMAP_THRESHOLD: Final = -3
"""glibc's mallopt parameter number."""
MMAP_THRESHOLD: Final = 256 * 1024
"""Blocks at least this large get a mapping of their own (glibc's default start is 128 KiB)."""
TRIM_INTERVAL: Final = 10.0
"""Seconds between two ``malloc_trim`` calls (each costs well under a millisecond)."""


def _libc() -> Any | None:
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        libc = ctypes.CDLL(name)
        libc.mallopt  # noqa: B018 -- glibc only
        libc.malloc_trim  # noqa: B018
    except (OSError, AttributeError):
        return None
    return libc


class ProcessMemory:
    """The peer's allocator settings and its periodic trim."""

    def __init__(self) -> None:
        self._libc = _libc()
        self._next_trim = 0.0

    def configure(self) -> bool:
        """Fix the mmap threshold (see the module docstring); False where not glibc."""
        if self._libc is None:
            return False
        return bool(self._libc.mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD))

    def maybe_trim(self, now: float) -> None:
        """Give free heap memory back to the system, at most every ``TRIM_INTERVAL``."""
        if self._libc is not None and now >= self._next_trim:
            self._next_trim = now + TRIM_INTERVAL
            self._libc.malloc_trim(0)


def heap_trimmer() -> Callable[[], None]:
    """glibc's ``malloc_trim(0)`` as a call (ctypes releases the GIL during it), or a no-op
    on a C library without it: what a listener calls once a flood of connections is over."""
    libc = _libc()
    if libc is None:
        return lambda: None
    trim = libc.malloc_trim

    def release() -> None:
        trim(0)

    return release


def descriptor_limit() -> int:
    """Raise this process's soft descriptor limit to its hard one and return it: a
    connection flood should meet the peer's own cap (``raftlog.server.backlog``), which
    keeps a reserve for its files, not the system's (issue #25, finding 4)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and soft < hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            soft = hard
        except (ValueError, OSError):
            pass
    return int(soft) if soft != resource.RLIM_INFINITY else 1 << 20


__all__ = ["ProcessMemory", "descriptor_limit"]
