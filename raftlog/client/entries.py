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
from collections.abc import AsyncGenerator, Callable
from dataclasses import dataclass
from types import TracebackType
from typing import Final

from raftlog.client.consistency import ReadLevel
from raftlog.client.dealer import CLOSED, next_delivery, raise_if_denied
from raftlog.client.models import IndexedEntry, StreamItem
from raftlog.client.routing import ClusterLink
from raftlog.errors import ClientClosedError, RemoteProtocolError
from raftlog.rpc import decode_response, encode_request
from raftlog.rpc.messages import (
    TYPE_REQUEST_ENTRIES,
    EntriesStatus,
    RequestEntries,
    RequestEntriesResponse,
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


async def _stream(
    link: ClusterLink,
    state: _State,
    timeout: float,
    from_peer: str | None = None,
    level: ReadLevel = ANY,
) -> AsyncGenerator[StreamItem, None]:
    base_timeout = link.response_timeout
    peer_timeout = base_timeout
    started = link.now()
    progress_deadline = started + timeout
    snap_prev: int | None = None  # original prevIndex while inside a snapshot
    snap_next = 0  # next expected snapshot byte offset
    snap_id: tuple[int, int, int] | None = None  # (index, term, size) of that snapshot
    if state.remaining == 0:
        return
    preferred = from_peer  # asked first, for committed entries (any_peer); then the leader
    if preferred is not None and level.linearizable:
        level = await level.for_follower()  # the leader's read index (RI) as the minimum
    while True:
        any_peer = preferred is not None

        def ask(
            prev: int, count: int | None, offset: int | None, peer: bool = any_peer
        ) -> RequestEntries:
            return RequestEntries(prev, count, offset, peer, level.min_index, level.linearizable)

        url = (
            preferred
            if preferred is not None
            else await link.leader_url(progress_deadline, started)
        )
        preferred = None  # whatever ends this attempt, the next one goes to the leader
        pair = link.open_stream_channel(url)
        channel, waiters = pair
        req_id = link.new_id()
        pipeline_open = False
        try:
            with waiters.register(req_id) as inbox:
                prev = state.last if snap_prev is None else snap_prev
                offset = snap_next if snap_prev is not None and snap_next else None
                first = ask(prev, state.remaining, offset)
                wait = min(base_timeout, progress_deadline - link.now())
                if not await channel.send(_frames(link, req_id, first), wait):
                    link.note(url, "unreachable")
                    link.forget_leader(url)
                    if link.now() >= progress_deadline:
                        raise link.unavailable(started, "entries stream stalled")
                    continue
                pipeline_open = True
                while True:
                    wait = min(peer_timeout, progress_deadline - link.now())
                    delivery = await next_delivery(inbox, wait)
                    if delivery is None:
                        if link.now() >= progress_deadline:
                            raise link.unavailable(started, "entries stream stalled")
                        link.note(url, "no response")
                        link.forget_leader(url)
                        peer_timeout = min(peer_timeout + base_timeout, 5 * base_timeout)
                        break
                    if delivery is CLOSED:
                        raise ClientClosedError("the raftlog client is closed")
                    raise_if_denied(delivery.frames)
                    try:
                        resp = decode_response(TYPE_REQUEST_ENTRIES, delivery.frames)[1]
                    except RemoteProtocolError as exc:
                        link.note(url, f"malformed response ({exc})")
                        continue
                    if not isinstance(resp, RequestEntriesResponse):
                        continue
                    progress_deadline = link.now() + timeout
                    ack: RequestEntries | None
                    if resp.status is EntriesStatus.NOT_LEADER:
                        pipeline_open = False
                        link.note(url, f"not leader (leader {resp.leader_id or 'unknown'})")
                        if link.leader_hint(resp.leader_id, url) is None:
                            peer_timeout = base_timeout
                            await asyncio.sleep(link.election_grace)
                        break
                    if resp.status is EntriesStatus.SNAPSHOT:
                        chunk = resp.snapshot
                        if chunk is None or chunk.index <= state.last:
                            continue  # a stale chunk, re-sent after the snapshot was done
                        snap = (chunk.index, chunk.term, chunk.total_size)
                        if snap != snap_id:  # a first or a different snapshot: from byte 0
                            snap_id, snap_next = snap, 0
                            if chunk.offset != 0:
                                link.note(url, "snapshot changed under the stream")
                                break
                        if chunk.offset < snap_next:
                            continue  # a duplicate chunk
                        if chunk.offset > snap_next:
                            link.note(url, "snapshot chunk out of order")
                            break
                        if snap_prev is None:
                            snap_prev = state.last
                        snap_next = chunk.offset + len(chunk.data)
                        if snap_next < chunk.total_size:
                            yield chunk
                            ack = ask(snap_prev, None, snap_next)
                        else:  # final chunk: continue with the entries after the snapshot
                            state.last, snap_prev, snap_next, snap_id = chunk.index, None, 0, None
                            if state.remaining is not None:
                                state.remaining -= 1
                            if state.remaining == 0:
                                pipeline_open = False  # the server closed it already
                                yield chunk
                                return
                            yield chunk
                            ack = ask(state.last, state.remaining, None)
                    else:
                        if resp.last_index is None or snap_prev is not None:
                            link.note(url, "entries while a snapshot was expected")
                            break
                        entries = resp.entries
                        first_index = resp.last_index - len(entries) + 1
                        if entries and first_index > state.last + 1:
                            link.note(url, "entries out of order")
                            break
                        for position, entry in enumerate(entries):
                            index = first_index + position
                            if index <= state.last:
                                continue
                            if state.remaining is not None:
                                if state.remaining == 0:
                                    return
                                state.remaining -= 1
                            state.last = index
                            yield IndexedEntry(index, entry)
                        if resp.status is EntriesStatus.LAST:
                            pipeline_open = False
                            return
                        if state.remaining == 0:
                            return
                        # §10.5: ack every status-2 batch; the count makes a restart (if the
                        # server dropped the pipeline meanwhile) keep the original bound.
                        ack = ask(resp.last_index, state.remaining, None)
                    wait = min(base_timeout, progress_deadline - link.now())
                    if not await channel.send(_frames(link, req_id, ack), wait):
                        link.note(url, "unreachable")
                        link.forget_leader(url)
                        break
        finally:
            linger = 0
            if pipeline_open:
                stop = ask(state.last, 0, None)
                if channel.send_nowait(_frames(link, req_id, stop)):
                    linger = STOP_LINGER_MS
            with contextlib.suppress(Exception):
                await link.close_stream_channel(pair, linger)
