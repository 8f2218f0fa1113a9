"""RequestEntries streams (docs/protocol.md §10.5) as back-pressured async iterators.

One stream = one dedicated DEALER connection + one request id, as the server keys its
pipelines by (connection, request id). The client:

* acknowledges every status-2 batch with its last index -- only once the consumer has
  pulled every entry of it, so a slow consumer slows the server down (the server keeps at
  most ``requestEntriesPipelines`` batches in flight);
* acknowledges every non-final snapshot chunk with the *original* prevIndex, an empty count
  frame and the next expected offset; after the final chunk it continues on the same
  connection with prevIndex = the snapshot's index;
* checks contiguity: a batch must end at ``last + len(entries)``; overlapping entries
  (index <= last delivered) are skipped, duplicated snapshot chunks ignored, a gap restarts;
* on "not leader", silence or a gap it resumes from the last index delivered (and the
  snapshot offset, mid-snapshot) on the leader, with a new connection and request id;
  the per-response timeout grows on repeated silence (up to 5x), like the reference;
* on early exit (``break``, ``aclose()``, an exception in the consumer) it sends the stop
  request (count 0) so the server drops the pipeline at once instead of after its TTL.

``timeout`` bounds the time *without progress* (no valid response), not the whole stream.
A ``SnapshotChunk`` with offset 0 starts a snapshot; if the leader's snapshot changes while
one is being streamed, the new one is streamed again from offset 0.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, Callable, Iterator, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Final

from raftlog.client.consistency import ReadLevel
from raftlog.client.dealer import (
    CLOSED,
    DealerChannel,
    Inbox,
    Waiters,
    next_delivery,
    raise_if_denied,
)
from raftlog.client.models import IndexedEntry, StreamItem
from raftlog.client.routing import ClusterLink
from raftlog.entry import LogEntry
from raftlog.errors import ClientClosedError, RemoteProtocolError
from raftlog.rpc import decode_response, encode_request
from raftlog.rpc.messages import (
    TYPE_REQUEST_ENTRIES,
    EntriesStatus,
    RequestEntries,
    RequestEntriesResponse,
    SnapshotChunk,
)

MAX_TIMEOUT_FACTOR: Final = 5
STOP_LINGER_MS: Final = 100
"""How long a closed stream socket may still try to deliver its stop request."""


ANY = ReadLevel()
"""The level of a plain read (``any``)."""


@dataclass(slots=True)
class _State:
    last: int
    """Index of the last entry delivered (the snapshot's index after its final chunk)."""
    remaining: int | None
    """Entries still wanted (a snapshot counts as one), None = unbounded."""


class EntryStream:
    """An ``AsyncIterator`` of :data:`~raftlog.client.models.StreamItem`; see the module doc.

    Also an async context manager; ``aclose()`` stops the stream early. Dropping an unfinished
    stream (``break`` out of ``async for``) closes it soon after, via asyncio's async
    generator finalizer.
    """

    def __init__(
        self,
        link: ClusterLink,
        prev_index: int,
        count: int | None,
        timeout: float,
        *,
        on_close: Callable[[EntryStream], None] | None = None,
        from_peer: str | None = None,
        level: ReadLevel = ANY,
    ) -> None:
        # The generator holds the state, not this object, so that dropping the stream drops
        # the generator at once (no reference cycle) and asyncio finalizes it.
        self._state = _State(prev_index, count)
        self._agen = _stream(link, self._state, timeout, from_peer, level)
        self._on_close = on_close

    @property
    def last_index(self) -> int:
        """Index of the last entry yielded so far (the snapshot index after a snapshot)."""
        return self._state.last

    def __aiter__(self) -> EntryStream:
        return self

    async def __anext__(self) -> StreamItem:
        return await self._agen.__anext__()

    async def aclose(self) -> None:
        """Stop the stream (sends the stop request if the server may still be sending)."""
        try:
            await self._agen.aclose()
        finally:
            if self._on_close is not None:
                self._on_close(self)

    async def __aenter__(self) -> EntryStream:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()


def _frames(link: ClusterLink, req_id: bytes, msg: RequestEntries) -> list[bytes]:
    return encode_request(msg, ident=link.ident, id=req_id)


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


async def _send(
    link: ClusterLink,
    url: str,
    channel: DealerChannel,
    req_id: bytes,
    msg: RequestEntries,
    *,
    wait: float,
) -> bool:
    """Send one request of the stream; False (noted, the leader forgotten): unreachable."""
    if await channel.send(_frames(link, req_id, msg), wait):
        return True
    link.note(url, "unreachable")
    link.forget_leader(url)
    return False


async def _next_response(
    link: ClusterLink, url: str, inbox: Inbox, cur: _Cursor
) -> RequestEntriesResponse | object | None:
    """The next response of an attempt, ``_SKIP``, or None after silence (noted, the wait
    grown); raises once the stream made no progress within its timeout."""
    wait = min(cur.peer_timeout, cur.deadline - link.now())
    delivery = await next_delivery(inbox, wait)
    if delivery is None:
        if link.now() >= cur.deadline:
            raise link.unavailable(cur.started, "entries stream stalled")
        link.note(url, "no response")
        link.forget_leader(url)
        cur.peer_timeout = min(
            cur.peer_timeout + cur.base_timeout, MAX_TIMEOUT_FACTOR * cur.base_timeout
        )
        return None
    if delivery is CLOSED:
        raise ClientClosedError("the raftlog client is closed")
    raise_if_denied(delivery.frames)
    try:
        resp = decode_response(TYPE_REQUEST_ENTRIES, delivery.frames)[1]
    except RemoteProtocolError as exc:
        link.note(url, f"malformed response ({exc})")
        return _SKIP
    if not isinstance(resp, RequestEntriesResponse):
        return _SKIP
    cur.deadline = link.now() + cur.timeout
    return resp


async def _not_leader(
    link: ClusterLink, url: str, resp: RequestEntriesResponse, cur: _Cursor
) -> None:
    """Follow a "not leader" answer: to the hinted leader, or after an election's grace."""
    cur.pipeline_open = False
    link.note(url, f"not leader (leader {resp.leader_id or 'unknown'})")
    if link.leader_hint(resp.leader_id, url) is None:
        cur.peer_timeout = cur.base_timeout
        await asyncio.sleep(link.election_grace)


async def _close_attempt(
    link: ClusterLink, cur: _Cursor, pair: tuple[DealerChannel, Waiters], req_id: bytes
) -> None:
    """Send the stop request if the server may still be sending, and drop the connection."""
    linger = 0
    if cur.pipeline_open:
        stop = cur.ask(cur.state.last, 0, None)
        if pair[0].send_nowait(_frames(link, req_id, stop)):
            linger = STOP_LINGER_MS
    with contextlib.suppress(Exception):
        await link.close_stream_channel(pair, linger)


async def _stream(
    link: ClusterLink,
    state: _State,
    timeout: float,
    from_peer: str | None = None,
    level: ReadLevel = ANY,
) -> AsyncGenerator[StreamItem, None]:
    started = link.now()
    base_timeout = link.response_timeout
    cur = _Cursor(state, level, base_timeout, timeout, started, started + timeout, base_timeout)
    if state.remaining == 0:
        return
    preferred = from_peer  # asked first, for committed entries (any_peer); then the leader
    if preferred is not None and level.linearizable:
        cur.level = await level.for_follower()  # the leader's read index (RI) as the minimum
    while True:
        cur.any_peer = preferred is not None
        url = preferred if preferred is not None else await link.leader_url(cur.deadline, started)
        preferred = None  # whatever ends this attempt, the next one goes to the leader
        pair = link.open_stream_channel(url)
        channel, waiters = pair
        req_id = link.new_id()
        cur.pipeline_open = False
        try:
            with waiters.register(req_id) as inbox:
                first = cur.first_request()
                wait = cur.send_wait(link.now())
                if not await _send(link, url, channel, req_id, first, wait=wait):
                    if link.now() >= cur.deadline:
                        raise link.unavailable(started, "entries stream stalled")
                    continue
                cur.pipeline_open = True
                while True:
                    resp = await _next_response(link, url, inbox, cur)
                    if resp is None:
                        break
                    if not isinstance(resp, RequestEntriesResponse):
                        continue
                    if resp.status is EntriesStatus.NOT_LEADER:
                        await _not_leader(link, url, resp, cur)
                        break
                    for item in cur.deliver(resp):
                        yield item
                    if cur.outcome is _DONE:
                        return
                    if isinstance(cur.outcome, str):
                        link.note(url, cur.outcome)
                        break
                    if not isinstance(cur.outcome, RequestEntries):
                        continue
                    wait = cur.send_wait(link.now())
                    if not await _send(link, url, channel, req_id, cur.outcome, wait=wait):
                        break
        finally:
            await _close_attempt(link, cur, pair, req_id)
