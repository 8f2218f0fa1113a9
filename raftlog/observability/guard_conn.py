"""An admitted connection as :class:`~raftlog.observability.guard.ConnectionGuard` tracks
it: its slot in the counts, its socket, and its reaper state -- including whether its
client still takes the bytes it is sent.

Why the write side is watched: a client that sends a request and stops reading leaves its
answer in the peer's memory for as long as the connection lives, and a live host's kernel
keeps such a connection open for ever (it answers zero-window probes). Sixty REST polls
from one address that were never read grew a peer from 83 to 742 MiB and kept it there;
a Fetch's answer can be 55 MiB. So a connection whose pending output has not shrunk for
``send_timeout_ms`` is aborted, and what its answer held is freed.
"""

from __future__ import annotations

import asyncio
import socket
import weakref
from collections.abc import Callable
from dataclasses import dataclass


class Slot:
    """One admitted connection's place in the counts; released exactly once."""

    __slots__ = ("__weakref__", "_release")

    def __init__(self, release: Callable[[], None]) -> None:
        self._release: Callable[[], None] | None = release

    def release(self) -> None:
        """Give the place back (later calls do nothing)."""
        release, self._release = self._release, None
        if release is not None:
            release()


class CountedSocket(socket.socket):
    """An accepted socket that gives its slot back when closed (or collected)."""

    def __init__(self, conn: socket.socket, slot: Slot) -> None:
        super().__init__(conn.family, conn.type, conn.proto, fileno=conn.detach())
        self._slot = slot
        weakref.finalize(self, slot.release)

    def close(self) -> None:
        """Close the descriptor, then free the slot."""
        super().close()
        self._slot.release()


@dataclass(slots=True, eq=False)
class GuardedConn:
    """An admitted connection, as the reaper sees it (no transport during the handshake)."""

    last: float
    """When it was accepted, or when its last request ended."""
    address: str
    """The client's address: eviction picks from the address holding the most."""
    task: asyncio.Task[None] | None = None
    transport: asyncio.BaseTransport | None = None
    requests: int = 0
    busy: int = 0
    pending: int = 0
    """Bytes of output the transport held at the last reaper pass."""
    stalled_since: float = 0.0
    """Since when that output has not shrunk (meaningful while ``pending``)."""

    def drop(self) -> None:
        """Abort the connection (or cancel its handshake); unsent output is discarded."""
        if self.transport is not None:
            self.transport.abort()  # type: ignore[attr-defined]
        elif self.task is not None:
            self.task.cancel()

    def write_stalled(self, now: float, timeout: float) -> bool:
        """Whether its client has taken none of its pending output for ``timeout`` seconds
        (called once per reaper pass): output that shrinks, or none, restarts the clock."""
        size = 0
        if self.transport is not None:
            size = self.transport.get_write_buffer_size()  # type: ignore[attr-defined]
        if size == 0 or self.pending == 0 or size < self.pending:
            self.stalled_since = now
        self.pending = size
        return size > 0 and now - self.stalled_since > timeout


__all__ = ["CountedSocket", "GuardedConn", "Slot"]
