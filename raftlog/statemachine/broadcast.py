"""BroadcastStateMachine: fans committed entries out on a ZeroMQ PUB socket (docs/protocol.md §11).

Every peer binds its PUB socket at start-up; only the leader publishes. Each applied batch is
sent at once as ``[ident, term, last_index, entry...]`` split into messages of at most 4096
entries / ~64 KiB (the reference's read batch), all entry types included; while idle the
leader sends a heartbeat ``[ident, term, last_applied]`` every ``heartbeat_interval``.

The PUB socket drops messages for slow subscribers (that is ZeroMQ's contract); subscribers
detect the gap from ``last_index`` and fill it with RequestEntries.

``last_applied`` is kept in memory; the peer's driver persists it with the hard state (see
``raftlog.server.node``), so a restart replays at most a few entries, which a subscriber sees
as duplicates it already skips by index.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Final

import msgpack
import zmq

from raftlog import sockets
from raftlog.rpc.codec import encode_broadcast_raw
from raftlog.rpc.messages import TYPE_REQUEST_BROADCAST_STATE_URL
from raftlog.security.settings import CurveServer
from raftlog.statemachine.base import BuiltSnapshot
from raftlog.transport import send_frames

MAX_BATCH_ENTRIES: Final = 4096
MAX_BATCH_BYTES: Final = 65536
"""Messages queued per subscriber before PUB drops (bounds memory for slow readers)."""


class BroadcastStateMachine:
    """The reference's default state machine: publishes what it applies."""

    name = "bsm"

    def __init__(
        self,
        context: zmq.Context[zmq.Socket[bytes]],
        *,
        ident: bytes,
        pub_url: str,
        bind_url: str,
        last_applied: int = 0,
        heartbeat_interval_ms: int = 500,
        curve: CurveServer | None = None,
        connection_keepalive: sockets.ServedKeepalive | None = None,
        on_bound: Callable[[zmq.Socket[bytes]], None] | None = None,
    ) -> None:
        self._ident = ident
        self._pub_url = pub_url
        self._last_applied = last_applied
        self._heartbeat = heartbeat_interval_ms / 1000.0
        self._is_leader = False
        self._term = 0
        self._next_heartbeat = 0.0
        self.published_messages = 0
        self._socket = sockets.broadcast_pub(
            context, bind_url, curve=curve, keepalive=connection_keepalive
        )
        if on_bound is not None:  # its connection caps watch from the first accept on
            on_bound(self._socket)

    @property
    def last_applied(self) -> int:
        """Index of the last entry applied (published, when leading)."""
        return self._last_applied

    @property
    def pub_url(self) -> str:
        """The advertised URL of the PUB socket (answered to RequestBroadcastStateUrl)."""
        return self._pub_url

    def apply(self, first_index: int, entries: Sequence[bytes], term: int) -> None:
        """Publish newly applied entries when leading (a replayed prefix is skipped: it was
        published before the restart), in batches bounded in entries and bytes."""
        if not entries:
            return
        last = first_index + len(entries) - 1
        if last <= self._last_applied:
            return  # a replay after restart: already applied (and published) before
        skip = max(0, self._last_applied + 1 - first_index)
        if self._is_leader:
            self._publish(first_index + skip, entries[skip:], term)
        self._last_applied = last

    def _publish(self, first_index: int, entries: Sequence[bytes], term: int) -> None:
        count = len(entries)
        if count <= MAX_BATCH_ENTRIES and sum(map(len, entries)) < MAX_BATCH_BYTES:
            # the usual Ready fits one message: the loop below would send the same frames
            self._send(encode_broadcast_raw(self._ident, term, first_index + count - 1, entries))
            self._next_heartbeat = time.monotonic() + self._heartbeat
            return
        start = 0
        while start < len(entries):
            end = start
            size = 0
            while end < len(entries) and end - start < MAX_BATCH_ENTRIES and size < MAX_BATCH_BYTES:
                size += len(entries[end])
                end += 1
            last = first_index + end - 1
            self._send(encode_broadcast_raw(self._ident, term, last, entries[start:end]))
            start = end
        self._next_heartbeat = time.monotonic() + self._heartbeat

    def _send(self, frames: list[bytes]) -> None:
        try:
            send_frames(self._socket, frames)
            self.published_messages += 1
        except zmq.Again:  # PUB does not block; kept for safety with odd socket options
            pass

    def set_leader(self, is_leader: bool, term: int) -> None:
        """Only the leader publishes (§11); a new leader announces itself with a heartbeat at
        once."""
        self._is_leader = is_leader
        self._term = term
        if is_leader:
            self._next_heartbeat = 0.0  # announce at once

    def on_timer(self, now: float) -> float:
        """Send the heartbeat (term, lastApplied) when leading, so subscribers notice gaps and a
        silent leader; returns when to run next."""
        if not self._is_leader:
            return now + self._heartbeat
        if now >= self._next_heartbeat:
            self._send(encode_broadcast_raw(self._ident, self._term, self._last_applied))
            self._next_heartbeat = now + self._heartbeat
        return self._next_heartbeat

    def restore(self, index: int, term: int, data: bytes) -> None:
        """The BSM's state is only its position: a snapshot moves it to ``index``."""
        self._last_applied = index

    def snapshot(self, index: int) -> bytes:
        """A small self-describing record; the BSM keeps no state besides its position."""
        packed: bytes = msgpack.packb({"bsm_last_applied": index})
        return packed

    def snapshot_build(self, index: int) -> BuiltSnapshot:
        """Its snapshot is a few bytes: taken at once."""
        return BuiltSnapshot(self.snapshot(index))

    def handle_request(self, msg_type: bytes, args: Sequence[bytes]) -> list[bytes] | None:
        """RequestBroadcastStateUrl: every peer answers with its own URL (§11.1); nothing else is
        for this machine."""
        if msg_type == TYPE_REQUEST_BROADCAST_STATE_URL:
            return [self._pub_url.encode()]  # every peer answers with its own URL (§11.1)
        return None

    def close(self) -> None:
        """Close the PUB socket without lingering (subscribers resubscribe elsewhere)."""
        self._socket.close(linger=0)
