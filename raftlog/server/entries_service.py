"""RequestEntries streaming (docs/protocol.md §10.5): pipelined batches of committed entries and
snapshot chunks, served by the leader up to its state machine's applied index -- and, for
requests that carry raftlog's ``any_peer`` flag, by a follower up to its own applied index.

A stream ("pipeline") is keyed by (ROUTER routing id, request id), as in the reference, so a
reconnect starts afresh. Up to ``pipelines`` status-2 batches (``snapshot_pipelines`` chunks)
are sent ahead of the client's acknowledgements; each acknowledgement must carry the last
index of the oldest unacknowledged batch (or, mid-snapshot, the original prevIndex and
optionally the next expected offset), otherwise the stream restarts from what it carries.
Idle streams expire after ``ttl_ms``; losing leadership drops them all.

Entries are read as stored bytes (``raw_entries``) and sent without re-encoding.

Sending is sliced (issue #12, finding 4): ``handle`` only registers, acknowledges or answers
what costs nothing; the batches themselves go out from :meth:`EntriesService.pump`, which the
peer's loop calls once per pass with a small time budget, one batch per due stream in turn.
A burst of streams can therefore never hold the consensus loop (and the heartbeats) back.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final, Protocol

from raftlog.rpc.messages import (
    EntriesStatus,
    RequestEntries,
    RequestEntriesResponse,
    SnapshotChunk,
)
from raftlog.server.interfaces import Replies
from raftlog.storage.base import SnapshotMeta

MAX_BATCH_ENTRIES: Final = 2048
MAX_BATCH_BYTES: Final = 131072
"""A batch ends at whichever limit it reaches first (at least one entry). Why these and not
the reference's 4,096 / 64 KiB (the protocol lets the server choose; clients must accept
any size): each batch costs the leader a fixed ~50 µs (a RocksDB seek, the loop pass, the
acknowledgement's receive and decode) and the reference's Node client a fixed cost too, so
bigger batches cost both less per entry -- until ~2,000 entries: above that the Node client
(one external Buffer per frame) spends more per entry on garbage collection. Measured on
100-byte entries (~1,070 per batch): docs/performance.md, "Reads"."""
SNAPSHOT_CHUNK: Final = 65536
SWEEP_INTERVAL: Final = 2.0


class RawLog(Protocol):
    """The log as the streams read it: stored bytes, no decoding."""

    @property
    def first_index(self) -> int:
        """The first index readable as an entry (below it: the snapshot)."""
        ...

    def raw_entries(self, lo: int, hi: int, max_bytes: int | None = None) -> list[bytes]:
        """Serialized entries ``[lo, hi)``, at most ``max_bytes`` (at least one)."""
        ...


class SnapshotReader(Protocol):
    """The installed snapshot, read in chunks."""

    def meta(self) -> SnapshotMeta | None:
        """The installed snapshot's metadata, or None."""
        ...

    def read(self, offset: int, size: int) -> bytes:
        """Up to ``size`` bytes of its data from ``offset``."""
        ...


@dataclass(slots=True)
class _Pipeline:
    routing: bytes
    req_id: bytes
    prev_index: int
    next_index: int
    last: int
    expires: float
    unacked: deque[int] = field(default_factory=deque)
    unacked_sizes: deque[int] = field(default_factory=deque)
    """Bytes of each batch in ``unacked`` (counted against ``max_unacked_bytes``)."""
    paused: bool = False
    snapshot: SnapshotMeta | None = None
    next_offset: int = 0
    final_sent: bool = False


@dataclass(frozen=True, slots=True)
class EntriesLimits:
    """Stream limits, from the peer's options (``request_entries_*``)."""

    pipelines: int = 5
    snapshot_pipelines: int = 2
    entry_size_limit_pipeline: int = 65536
    high_watermark: int = 8000
    ttl_ms: int = 5000
    max_unacked_bytes: int = 16 << 20
    """Entry/snapshot bytes sent and not yet acknowledged, over all streams together. Streams
    whose clients never read would otherwise each park ``pipelines`` batches in the ROUTER's
    queues: 1,000 of them pushed ~320 MB through the peer's single ZeroMQ I/O thread, which
    delayed its heartbeats long enough for an election (issue #12, finding 4). Streams wait
    for their turn beyond it; idle ones expire after ``ttl_ms`` and release their share."""


class EntriesService:
    """The RequestEntries streams this leader serves (see the module docstring)."""

    def __init__(
        self, log: RawLog, snapshots: SnapshotReader, replies: Replies, limits: EntriesLimits
    ) -> None:
        self._log = log
        self._snapshots = snapshots
        self._replies = replies
        self._limits = limits
        self._pipes: dict[tuple[bytes, bytes], _Pipeline] = {}
        self._due: dict[tuple[bytes, bytes], None] = {}
        """Streams that may send, in turn order (an ordered set)."""
        self._unacked_bytes = 0
        self._next_sweep = 0.0

    @property
    def open_pipelines(self) -> int:
        """Streams open now."""
        return len(self._pipes)

    def is_open(self, key: object) -> bool:
        """Is the stream ``(routing id, request id)`` still open? (The streams quota,
        ``raftlog.server.quota_gate``, forgets the ended ones by asking.)"""
        return key in self._pipes

    def handle(
        self,
        routing: bytes,
        req_id: bytes,
        msg: RequestEntries,
        *,
        leader: bool,
        leader_id: str | None,
        applied: int,
        now: float,
    ) -> None:
        """One RequestEntries: start, acknowledge, restart or stop a stream (§10.5).

        ``applied`` is this peer's own last applied index. A follower serves only streams
        that ask for it (``any_peer``, a raftlog extension): up to its own applied index,
        which never passes its commit index, so it only ever sends committed entries."""
        if not leader and not msg.any_peer:
            answer = RequestEntriesResponse(EntriesStatus.NOT_LEADER, leader_id=leader_id)
            self._replies.reply(routing, req_id, answer)
            return
        key = (routing, req_id)
        pipe = self._pipes.get(key)
        if pipe is not None:
            if msg.count == 0:
                self._close(key)  # stop: no response (§10.5)
                return
            if self._acknowledge(pipe, msg):
                pipe.expires = now + self._limits.ttl_ms / 1000.0
                self._schedule(key)
                return
            self._close(key)  # out of order: restart from what the client carries
        if msg.count == 0 or len(self._pipes) > self._limits.high_watermark:
            return
        self._start(key, msg, applied, now)

    def _acknowledge(self, pipe: _Pipeline, msg: RequestEntries) -> bool:
        if not pipe.unacked:
            return False
        if pipe.snapshot is not None:
            if msg.prev_index != pipe.prev_index:
                return False
            if msg.snapshot_offset is not None and msg.snapshot_offset != pipe.unacked[0]:
                return False
        elif msg.prev_index != pipe.unacked[0]:
            return False
        pipe.unacked.popleft()
        self._unacked_bytes -= pipe.unacked_sizes.popleft()
        pipe.paused = False
        return True

    def _start(
        self, key: tuple[bytes, bytes], msg: RequestEntries, applied: int, now: float
    ) -> None:
        routing, req_id = key
        expires = now + self._limits.ttl_ms / 1000.0
        if msg.prev_index + 1 < self._log.first_index:
            meta = self._snapshots.meta()
            if meta is None:
                return  # cannot happen in a consistent store; the client will time out
            offset = min(msg.snapshot_offset or 0, meta.size)
            pipe = _Pipeline(routing, req_id, msg.prev_index, 0, 0, expires, snapshot=meta)
            pipe.next_offset = offset
            self._pipes[key] = pipe
            self._schedule(key)
            return
        if msg.prev_index >= applied:
            answer = RequestEntriesResponse(EntriesStatus.LAST, last_index=applied)
            self._replies.reply(routing, req_id, answer)
            return
        last = applied if msg.count is None else min(msg.prev_index + msg.count, applied)
        pipe = _Pipeline(routing, req_id, msg.prev_index, msg.prev_index + 1, last, expires)
        self._pipes[key] = pipe
        self._schedule(key)

    # -- sending, sliced (issue #12, finding 4) ---------------------------------------------
    def _schedule(self, key: tuple[bytes, bytes]) -> None:
        """The stream may send: queue it for ``pump`` (round-robin, at most once)."""
        self._due[key] = None

    @property
    def has_due(self) -> bool:
        """Can a stream send now? (The loop then polls without sleeping.)"""
        return bool(self._due) and self._unacked_bytes < self._limits.max_unacked_bytes

    @property
    def unacked_bytes(self) -> int:
        """Bytes sent on all streams and not yet acknowledged."""
        return self._unacked_bytes

    def _track(self, pipe: _Pipeline, size: int) -> None:
        pipe.unacked_sizes.append(size)
        self._unacked_bytes += size

    def _close(self, key: tuple[bytes, bytes]) -> None:
        pipe = self._pipes.pop(key)
        self._unacked_bytes -= sum(pipe.unacked_sizes)
        self._due.pop(key, None)

    def pump(self, until: float, clock: Callable[[], float]) -> int:
        """Send batches of the due streams, one batch per stream in turn, until none is due
        or ``clock()`` passes ``until``; returns the number of batches sent.

        Why sliced: a burst of new streams used to be served inside the message handler, each
        reading and sending up to ``pipelines`` 64 KiB batches at once; 200 to 1,000 streams
        held the consensus loop for 200-340 ms (measured), longer than the election timeout,
        and followers elected a new leader. Now the handler only registers the stream and the
        loop gives streaming a bounded slice of each pass."""
        sent = 0
        due = self._due
        cap = self._limits.max_unacked_bytes
        while due and self._unacked_bytes < cap:
            key = next(iter(due))
            del due[key]
            pipe = self._pipes.get(key)
            if pipe is None:
                continue
            if self._send_one(key, pipe):
                sent += 1
                if self._can_send(key, pipe):
                    due[key] = None  # back of the queue: every stream gets its turn
            if clock() >= until:
                break
        return sent

    def _can_send(self, key: tuple[bytes, bytes], pipe: _Pipeline) -> bool:
        if self._pipes.get(key) is not pipe:
            return False
        if pipe.snapshot is not None:
            return not pipe.final_sent and len(pipe.unacked) < self._limits.snapshot_pipelines
        return (
            not pipe.paused
            and len(pipe.unacked) < self._limits.pipelines
            and pipe.next_index <= pipe.last
        )

    def _send_one(self, key: tuple[bytes, bytes], pipe: _Pipeline) -> bool:
        """Send the stream's next batch (or snapshot chunk) if its window allows; False when
        nothing was sent. Closes the stream when everything is sent and acknowledged."""
        if pipe.snapshot is not None:
            return self._send_chunk(key, pipe, pipe.snapshot)
        sent = False
        if self._can_send(key, pipe):
            hi = min(pipe.last + 1, pipe.next_index + MAX_BATCH_ENTRIES)
            try:
                raw = self._log.raw_entries(pipe.next_index, hi, MAX_BATCH_BYTES)
            except IndexError:  # compacted under the stream: the client restarts
                self._close(key)
                return False
            batch_last = pipe.next_index + len(raw) - 1
            final = batch_last >= pipe.last
            status = EntriesStatus.LAST if final else EntriesStatus.MORE
            answer = RequestEntriesResponse(status, last_index=batch_last, raw_entries=raw)
            self._replies.reply(pipe.routing, pipe.req_id, answer)
            pipe.next_index = batch_last + 1
            sent = True
            if not final:
                pipe.unacked.append(batch_last)
                self._track(pipe, sum(map(len, raw)))
                if len(raw) == 1 and len(raw[0]) > self._limits.entry_size_limit_pipeline:
                    pipe.paused = True
        if pipe.next_index > pipe.last and not pipe.unacked:
            self._close(key)
        return sent

    def _send_chunk(self, key: tuple[bytes, bytes], pipe: _Pipeline, meta: SnapshotMeta) -> bool:
        if self._snapshots.meta() != meta:
            self._close(key)  # replaced under the stream: the client restarts
            return False
        sent = False
        if not pipe.final_sent and len(pipe.unacked) < self._limits.snapshot_pipelines:
            offset = pipe.next_offset
            chunk = self._snapshots.read(offset, SNAPSHOT_CHUNK) if offset < meta.size else b""
            piece = SnapshotChunk(offset, meta.size, meta.term, meta.index, chunk)
            answer = RequestEntriesResponse(EntriesStatus.SNAPSHOT, snapshot=piece)
            self._replies.reply(pipe.routing, pipe.req_id, answer)
            pipe.next_offset = offset + len(chunk)
            sent = True
            if pipe.next_offset >= meta.size:
                pipe.final_sent = True
            else:
                pipe.unacked.append(pipe.next_offset)
                self._track(pipe, len(chunk))
        if pipe.final_sent and not pipe.unacked:
            # Closed only once every non-final chunk is acknowledged (as the reference): an
            # ack arriving later would otherwise restart the stream and resend the last chunk.
            # The client then continues with prevIndex = meta.index, a new entries stream.
            self._close(key)
        return sent

    def sweep(self, now: float) -> None:
        """Drop idle streams (called often; does work every ``SWEEP_INTERVAL``)."""
        if now < self._next_sweep:
            return
        self._next_sweep = now + SWEEP_INTERVAL
        for key in [k for k, p in self._pipes.items() if p.expires < now]:
            self._close(key)

    def drop_all(self) -> None:
        """Leadership lost: every stream ends (clients restart at the new leader)."""
        self._pipes.clear()
        self._due.clear()
        self._unacked_bytes = 0
