"""``Subscriber``: history, then live StateBroadcasts, without gaps or duplicates (§11).

::

    async with Subscriber(peers, "raftlog-local", from_index=0) as sub:
        async for item in sub:          # IndexedEntry (SnapshotChunk if the log was compacted)
            handle(item)                # resume later with from_index=sub.last_index

How it works:

1. ask the *leader* for its PUB URL (every peer answers with its own, §11.1) and SUB to it
   with the cluster ident as subscription, *before* reading history, so ZeroMQ buffers the
   broadcasts that arrive meanwhile (frame 1 must equal the ident exactly: SUB matches
   prefixes only);
2. read the history with ``request_entries(last_index)`` (``caught_up`` is False meanwhile);
3. live: each broadcast ``[ident, term, last, entries...]`` is checked against the last
   index seen: entries at or below it are dropped (history and broadcasts overlap), a gap
   (``last - len(entries) != last_index``, or a heartbeat ahead of ``last_index``: PUB drops
   for slow subscribers, and broadcasts published before the subscription took effect are
   lost) is filled with ``request_entries`` before the broadcast's own entries are yielded;
4. silence longer than ``broadcast_timeout`` (the leader heartbeats every 500 ms) means the
   leader is lost: forget it, rediscover, resubscribe and catch up from ``last_index``.

``from_index`` is exclusive, like ``request_entries``' ``prev_index`` and the reference
subscriber's ``lastIndex``: entries *after* it are delivered (0 = everything); ``"end"``
starts after the leader's current last applied index (live updates only).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, Sequence
from types import TracebackType
from typing import Literal

import zmq.asyncio

from raftlog.client.client import RaftClient
from raftlog.client.logs import client_log
from raftlog.client.models import (
    BROADCAST_TIMEOUT,
    MIN_BROADCAST_TIMEOUT,
    IndexedEntry,
    StreamItem,
)
from raftlog.entry import EntryType
from raftlog.errors import RemoteProtocolError
from raftlog.rpc import decode_broadcast
from raftlog.rpc.messages import SnapshotChunk, StateBroadcast

_CONTROL_TYPES = frozenset({EntryType.CONFIG, EntryType.CHECKPOINT})


class Subscriber:
    """Async iterator over the log from ``from_index`` on, following it live; see module doc.

    ``client_or_peers``: a :class:`RaftClient` to share (not closed by the subscriber) or
    seed URLs (a private client is created, with ``ident`` required). ``skip_control``:
    drop CONFIG and CHECKPOINT entries (their indexes still advance ``last_index``).
    ``timeout``: deadline of each discovery / catch-up call (``ClusterUnavailableError``).
    """

    def __init__(
        self,
        client_or_peers: RaftClient | Sequence[str],
        ident: str | bytes | None = None,
        *,
        from_index: int | Literal["end"] = 0,
        skip_control: bool = True,
        broadcast_timeout: float = BROADCAST_TIMEOUT,
        timeout: float | None = None,
    ) -> None:
        if isinstance(client_or_peers, RaftClient):
            self._client: RaftClient | None = client_or_peers
            self._peers: list[str] = []
            self._owns_client = False
            ident = client_or_peers.ident if ident is None else ident
        else:
            if ident is None:
                raise ValueError("ident is required when the subscriber creates its client")
            self._client = None
            self._peers = (
                [client_or_peers] if isinstance(client_or_peers, str) else list(client_or_peers)
            )
            self._owns_client = True
        if ident is None:
            raise ValueError("ident is required")
        self._ident = ident.encode() if isinstance(ident, str) else bytes(ident)
        if from_index != "end" and (not isinstance(from_index, int) or from_index < 0):
            raise ValueError('from_index must be a non-negative int or "end"')
        self._last: int | None = None if from_index == "end" else from_index
        self._skip_control = skip_control
        self._broadcast_timeout = max(broadcast_timeout, MIN_BROADCAST_TIMEOUT)
        self._timeout = timeout
        self._caught_up = False
        self._sub: zmq.asyncio.Socket | None = None
        self.resubscriptions = 0
        """How many times the leader was lost and the subscription renewed."""
        self.gaps_filled = 0
        """How many gaps between broadcasts were filled with RequestEntries."""
        self._agen = self._run()

    # -- public state ----------------------------------------------------------------------
    @property
    def last_index(self) -> int:
        """Index of the last entry processed (yielded or skipped); resume from here."""
        return self._last or 0

    @property
    def caught_up(self) -> bool:
        """True while following live broadcasts with nothing known to be missing."""
        return self._caught_up

    # -- iteration and lifecycle -----------------------------------------------------------
    def __aiter__(self) -> Subscriber:
        return self

    async def __anext__(self) -> StreamItem:
        return await self._agen.__anext__()

    async def __aenter__(self) -> Subscriber:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Stop: close the SUB socket, and the private client if this subscriber made one."""
        try:
            await self._agen.aclose()
        finally:
            self._close_sub()
            if self._owns_client and self._client is not None:
                await self._client.aclose()

    # -- internals -------------------------------------------------------------------------
    def _close_sub(self) -> None:
        if self._sub is not None:
            if self._client is not None:
                self._client.close_broadcast_socket(self._sub)
            else:
                self._sub.close(linger=0)
            self._sub = None
        self._caught_up = False

    async def _subscribe(self, client: RaftClient) -> zmq.asyncio.Socket:
        url = await client.request_broadcast_url(timeout=self._timeout)
        sub = client.open_broadcast_socket(url, self._ident)
        self._sub = sub
        client_log().debug("subscriber_subscribed", url=url, last_index=self._last)
        return sub

    def _wanted(self, item: StreamItem) -> bool:
        if isinstance(item, SnapshotChunk):
            return True
        return not (self._skip_control and item.entry.entry_type in _CONTROL_TYPES)

    async def _read(
        self, client: RaftClient, count: int | None = None
    ) -> AsyncGenerator[StreamItem, None]:
        """Entries after ``last_index`` via RequestEntries, advancing ``last_index``."""
        self._caught_up = False
        async with client.request_entries(self.last_index, count, timeout=self._timeout) as it:
            async for item in it:
                if isinstance(item, SnapshotChunk):
                    if item.offset + len(item.data) >= item.total_size:
                        self._last = item.index
                    yield item
                    continue
                self._last = item.index
                if self._wanted(item):
                    yield item

    async def _receive(self, sub: zmq.asyncio.Socket) -> StateBroadcast | None:
        """The next broadcast of our cluster; None on silence (leader lost)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._broadcast_timeout
        while (remaining := deadline - loop.time()) > 0:
            try:
                async with asyncio.timeout(remaining):
                    frames = await sub.recv_multipart()
            except TimeoutError:
                return None
            try:
                ident, broadcast = decode_broadcast(frames)
            except RemoteProtocolError as exc:
                client_log().debug("subscriber_bad_broadcast", reason=str(exc))
                continue
            if ident == self._ident:
                return broadcast
        return None

    async def _run(self) -> AsyncGenerator[StreamItem, None]:
        client = self._client
        if client is None:
            client = self._client = RaftClient(self._peers, self._ident)
        while True:
            sub = await self._subscribe(client)
            try:
                if self._last is None:  # "end": start after the leader's last applied index
                    info = await client.request_log_info(timeout=self._timeout)
                    self._last = info.last_applied
                async with contextlib.aclosing(self._read(client)) as history:
                    async for item in history:
                        yield item
                self._caught_up = True
                while (broadcast := await self._receive(sub)) is not None:
                    async with contextlib.aclosing(self._apply(client, broadcast)) as news:
                        async for item in news:
                            yield item
                client_log().debug("subscriber_leader_lost", last_index=self._last)
                self.resubscriptions += 1
                client.invalidate_leader()
            finally:
                self._close_sub()

    async def _apply(
        self, client: RaftClient, broadcast: StateBroadcast
    ) -> AsyncGenerator[StreamItem, None]:
        last = self.last_index
        first = broadcast.last_index - len(broadcast.entries) + 1
        if first > last + 1:  # gap: entries (last, first) were never received
            self.gaps_filled += 1
            async with contextlib.aclosing(self._read(client, first - 1 - last)) as missing:
                async for item in missing:
                    yield item
            self._caught_up = True
            last = self.last_index
            if first > last + 1:  # the leader could not serve the gap (yet): retry later
                return
        for position, entry in enumerate(broadcast.entries):
            index = first + position
            if index <= last:
                continue
            self._last = last = index
            item = IndexedEntry(index, entry)
            if self._wanted(item):
                yield item
