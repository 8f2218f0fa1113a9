"""RequestEntries streaming (docs/protocol.md §10.5): pipelined batches of committed entries and
snapshot chunks, served by the leader up to its state machine's applied index.

A stream ("pipeline") is keyed by (ROUTER routing id, request id), as in the reference, so a
reconnect starts afresh. Up to ``pipelines`` status-2 batches (``snapshot_pipelines`` chunks)
are sent ahead of the client's acknowledgements; each acknowledgement must carry the last
index of the oldest unacknowledged batch (or, mid-snapshot, the original prevIndex and
optionally the next expected offset), otherwise the stream restarts from what it carries.
Idle streams expire after ``ttl_ms``; losing leadership drops them all.

Entries are read as stored bytes (``raw_entries``) and sent without re-encoding.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final, Protocol

from raftlog.rpc.frames import JSON_NULL, encode_uint, pack_json
from raftlog.rpc.messages import EntriesStatus, RequestEntries
from raftlog.storage.base import SnapshotMeta

MAX_BATCH_ENTRIES: Final = 4096
MAX_BATCH_BYTES: Final = 65536
SNAPSHOT_CHUNK: Final = 65536
SWEEP_INTERVAL: Final = 2.0

_LAST: Final = encode_uint(EntriesStatus.LAST)
_MORE: Final = encode_uint(EntriesStatus.MORE)
_SNAPSHOT: Final = encode_uint(EntriesStatus.SNAPSHOT)
_NOT_LEADER: Final = encode_uint(EntriesStatus.NOT_LEADER)


class RawLog(Protocol):
    @property
    def first_index(self) -> int: ...

    def raw_entries(self, lo: int, hi: int, max_bytes: int | None = None) -> list[bytes]: ...


class SnapshotReader(Protocol):
    def meta(self) -> SnapshotMeta | None: ...

    def read(self, offset: int, size: int) -> bytes: ...


Reply = Callable[[bytes, list[bytes]], None]


@dataclass(slots=True)
class _Pipeline:
    routing: bytes
    req_id: bytes
    prev_index: int
    next_index: int
    last: int
    expires: float
    unacked: deque[int] = field(default_factory=deque)
    paused: bool = False
    snapshot: SnapshotMeta | None = None
    next_offset: int = 0
    final_sent: bool = False


@dataclass(frozen=True, slots=True)
class EntriesLimits:
    pipelines: int = 5
    snapshot_pipelines: int = 2
    entry_size_limit_pipeline: int = 65536
    high_watermark: int = 8000
    ttl_ms: int = 5000


class EntriesService:
    def __init__(
        self, log: RawLog, snapshots: SnapshotReader, reply: Reply, limits: EntriesLimits
    ) -> None:
        self._log = log
        self._snapshots = snapshots
        self._reply = reply
        self._limits = limits
        self._pipes: dict[tuple[bytes, bytes], _Pipeline] = {}
        self._next_sweep = 0.0

    @property
    def open_pipelines(self) -> int:
        return len(self._pipes)

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
        if not leader:
            self._reply(routing, [req_id, _NOT_LEADER, pack_json(leader_id)])
            return
        key = (routing, req_id)
        pipe = self._pipes.get(key)
        if pipe is not None:
            if msg.count == 0:
                del self._pipes[key]  # stop: no response (§10.5)
                return
            if self._acknowledge(pipe, msg):
                pipe.expires = now + self._limits.ttl_ms / 1000.0
                self._fill(key, pipe)
                return
            del self._pipes[key]  # out of order: restart from what the client carries
        if msg.count == 0 or len(self._pipes) > self._limits.high_watermark:
            return
        self._start(key, msg, applied, now)

    @staticmethod
    def _acknowledge(pipe: _Pipeline, msg: RequestEntries) -> bool:
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
            self._fill(key, pipe)
            return
        if msg.prev_index >= applied:
            self._reply(routing, [req_id, _LAST, JSON_NULL, encode_uint(applied)])
            return
        last = applied if msg.count is None else min(msg.prev_index + msg.count, applied)
        pipe = _Pipeline(routing, req_id, msg.prev_index, msg.prev_index + 1, last, expires)
        self._pipes[key] = pipe
        self._fill(key, pipe)

    def _fill(self, key: tuple[bytes, bytes], pipe: _Pipeline) -> None:
        if pipe.snapshot is not None:
            self._fill_snapshot(key, pipe, pipe.snapshot)
            return
        limits = self._limits
        while len(pipe.unacked) < limits.pipelines and pipe.next_index <= pipe.last:
            if pipe.paused:
                return
            hi = min(pipe.last + 1, pipe.next_index + MAX_BATCH_ENTRIES)
            try:
                raw = self._log.raw_entries(pipe.next_index, hi, MAX_BATCH_BYTES)
            except IndexError:  # compacted under the stream: the client restarts
                del self._pipes[key]
                return
            batch_last = pipe.next_index + len(raw) - 1
            final = batch_last >= pipe.last
            self._reply(
                pipe.routing,
                [pipe.req_id, _LAST if final else _MORE, JSON_NULL, encode_uint(batch_last), *raw],
            )
            pipe.next_index = batch_last + 1
            if not final:
                pipe.unacked.append(batch_last)
                if len(raw) == 1 and len(raw[0]) > limits.entry_size_limit_pipeline:
                    pipe.paused = True
        if pipe.next_index > pipe.last and not pipe.unacked:
            del self._pipes[key]

    def _fill_snapshot(self, key: tuple[bytes, bytes], pipe: _Pipeline, meta: SnapshotMeta) -> None:
        if self._snapshots.meta() != meta:
            del self._pipes[key]  # replaced under the stream: the client restarts
            return
        header_tail = encode_uint(meta.index)
        while not pipe.final_sent and len(pipe.unacked) < self._limits.snapshot_pipelines:
            offset = pipe.next_offset
            chunk = self._snapshots.read(offset, SNAPSHOT_CHUNK) if offset < meta.size else b""
            triple = pack_json([offset, meta.size, meta.term])
            self._reply(pipe.routing, [pipe.req_id, _SNAPSHOT, triple, header_tail, chunk])
            pipe.next_offset = offset + len(chunk)
            if pipe.next_offset >= meta.size:
                pipe.final_sent = True
            else:
                pipe.unacked.append(pipe.next_offset)
        if pipe.final_sent and not pipe.unacked:
            # Closed only once every non-final chunk is acknowledged (as the reference): an
            # ack arriving later would otherwise restart the stream and resend the last chunk.
            # The client then continues with prevIndex = meta.index, a new entries stream.
            del self._pipes[key]

    def sweep(self, now: float) -> None:
        """Drop idle streams (called often; does work every ``SWEEP_INTERVAL``)."""
        if now < self._next_sweep:
            return
        self._next_sweep = now + SWEEP_INTERVAL
        for key in [k for k, p in self._pipes.items() if p.expires < now]:
            del self._pipes[key]

    def drop_all(self) -> None:
        self._pipes.clear()
