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

This module does the I/O of a stream; what each response means for it (the rules above, the
acknowledgement due) is decided by ``_Cursor`` in :mod:`raftlog.client.entries_cursor`.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, Callable
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
from raftlog.client.entries_cursor import _DONE, _SKIP, _Cursor, _State
from raftlog.client.models import StreamItem
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
