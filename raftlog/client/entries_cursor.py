"""The bookkeeping of one RequestEntries stream (docs/protocol.md §10.5), without any I/O.

Why a module of its own: what a response means for the stream -- a batch that must continue
at ``last + 1`` (overlap skipped, a gap restarts), snapshot chunks in order from offset 0,
the acknowledgement each step calls for, the count still wanted -- is pure state, apart from
how :mod:`raftlog.client.entries` moves it (one connection and request id per attempt,
sends, waits, restarts). ``_Cursor`` holds that state across the attempts of a stream and
decides each step; the stream loop sends what it decided.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Final

from raftlog.client.consistency import ReadLevel
from raftlog.client.models import IndexedEntry, StreamItem
from raftlog.entry import LogEntry
from raftlog.rpc.messages import (
    EntriesStatus,
    RequestEntries,
    RequestEntriesResponse,
    SnapshotChunk,
)


@dataclass(slots=True)
class _State:
    last: int
    """Index of the last entry delivered (the snapshot's index after its final chunk)."""
    remaining: int | None
    """Entries still wanted (a snapshot counts as one), None = unbounded."""


_SKIP: Final = object()
"""A response to ignore (malformed, stale or duplicated); the stream waits for the next."""
_DONE: Final = object()
"""The stream has delivered what was asked (or the server said it was the last batch)."""


@dataclass(slots=True)
class _Cursor:
    """What the steps of one stream share across its attempts: where it is (``state``, the
    snapshot in progress) and how long it waits (the per-response timeout that grows on
    silence, the deadline that moves on progress)."""

    state: _State
    level: ReadLevel
    base_timeout: float
    timeout: float
    started: float
    deadline: float
    peer_timeout: float
    any_peer: bool = False
    """Whether the current attempt asks a chosen peer for committed entries (not the leader)."""
    snap_prev: int | None = None
    """The original prevIndex while inside a snapshot."""
    snap_next: int = 0
    """The next expected snapshot byte offset."""
    snap_id: tuple[int, int, int] | None = None
    """(index, term, size) of the snapshot being streamed."""
    pipeline_open: bool = False
    """Whether the server may still be sending on the current attempt (then a stop is due)."""
    outcome: object = None
    """What :meth:`deliver` decided: the acknowledgement to send, ``_SKIP``, ``_DONE``, or
    a reason (``str``) to restart the attempt."""

    def ask(self, prev: int, count: int | None, offset: int | None) -> RequestEntries:
        """A request of this stream at the read level it was asked for."""
        level = self.level
        return RequestEntries(
            prev, count, offset, self.any_peer, level.min_index, level.linearizable
        )

    def first_request(self) -> RequestEntries:
        """An attempt's request: resume after the last entry, or mid-snapshot at its offset."""
        prev = self.state.last if self.snap_prev is None else self.snap_prev
        offset = self.snap_next if self.snap_prev is not None and self.snap_next else None
        return self.ask(prev, self.state.remaining, offset)

    def send_wait(self, now: float) -> float:
        return min(self.base_timeout, self.deadline - now)

    def snapshot_step(
        self, chunk: SnapshotChunk | None
    ) -> object | str | tuple[SnapshotChunk, RequestEntries | None]:
        """Take one snapshot chunk: ``_SKIP``, a reason to restart the attempt, or the chunk
        to deliver with the acknowledgement to send after it (None: the stream is done)."""
        state = self.state
        if chunk is None or chunk.index <= state.last:
            return _SKIP  # a stale chunk, re-sent after the snapshot was done
        snap = (chunk.index, chunk.term, chunk.total_size)
        if snap != self.snap_id:  # a first or a different snapshot: from byte 0
            self.snap_id, self.snap_next = snap, 0
            if chunk.offset != 0:
                return "snapshot changed under the stream"
        if chunk.offset < self.snap_next:
            return _SKIP  # a duplicate chunk
        if chunk.offset > self.snap_next:
            return "snapshot chunk out of order"
        if self.snap_prev is None:
            self.snap_prev = state.last
        self.snap_next = chunk.offset + len(chunk.data)
        if self.snap_next < chunk.total_size:
            return chunk, self.ask(self.snap_prev, None, self.snap_next)
        # final chunk: continue with the entries after the snapshot
        state.last, self.snap_prev, self.snap_next, self.snap_id = chunk.index, None, 0, None
        if state.remaining is not None:
            state.remaining -= 1
        if state.remaining == 0:
            return chunk, None
        return chunk, self.ask(state.last, state.remaining, None)

    def deliver(self, resp: RequestEntriesResponse) -> Iterator[StreamItem]:
        """The items of a snapshot chunk or an entry batch, one by one as the consumer pulls
        them; sets :attr:`outcome` for the stream's next move."""
        if resp.status is EntriesStatus.SNAPSHOT:
            yield from self._deliver_chunk(resp.snapshot)
        else:
            yield from self._deliver_batch(resp)

    def _deliver_chunk(self, chunk: SnapshotChunk | None) -> Iterator[StreamItem]:
        step = self.snapshot_step(chunk)
        if not isinstance(step, tuple):
            self.outcome = step
            return
        delivered, ack = step
        if ack is None:
            self.pipeline_open = False  # the server closed it already
            self.outcome = _DONE
        else:
            self.outcome = ack
        yield delivered

    def _deliver_batch(self, resp: RequestEntriesResponse) -> Iterator[StreamItem]:
        first_index = self.batch_start(resp)
        if isinstance(first_index, str):
            self.outcome = first_index
            return
        yield from self.new_entries(resp.entries, first_index)
        state = self.state
        batch_last = first_index + len(resp.entries) - 1  # resp.last_index
        if state.remaining == 0 and batch_last > state.last:
            self.outcome = _DONE  # the count was reached inside the batch
        elif resp.status is EntriesStatus.LAST:
            self.pipeline_open = False
            self.outcome = _DONE
        elif state.remaining == 0:
            self.outcome = _DONE
        else:
            # §10.5: ack every status-2 batch; the count makes a restart (if the server
            # dropped the pipeline meanwhile) keep the original bound.
            self.outcome = self.ask(batch_last, state.remaining, None)

    def batch_start(self, resp: RequestEntriesResponse) -> int | str:
        """The index of a batch's first entry, or a reason to restart the attempt."""
        if resp.last_index is None or self.snap_prev is not None:
            return "entries while a snapshot was expected"
        first_index = resp.last_index - len(resp.entries) + 1
        if resp.entries and first_index > self.state.last + 1:
            return "entries out of order"
        return first_index

    def new_entries(self, entries: Sequence[LogEntry], first_index: int) -> Iterator[IndexedEntry]:
        """The batch's entries past the last delivered (overlap skipped), counted as each is
        pulled, so ``last_index`` never runs ahead of the consumer."""
        state = self.state
        for position, entry in enumerate(entries):
            index = first_index + position
            if index <= state.last:
                continue
            if state.remaining == 0:
                return
            if state.remaining is not None:
                state.remaining -= 1
            state.last = index
            yield IndexedEntry(index, entry)
