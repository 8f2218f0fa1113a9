"""``Connections``: the client's sockets to the peers, and what they say about reachability.

One :class:`~raftlog.client.dealer.DealerChannel` per peer URL (created on first use), the
dedicated channels of RequestEntries streams, the SUB sockets of subscribers, the request-id
counter, and the record of what each peer did during a call. It knows nothing of leaders:
:class:`~raftlog.client.routing.ClusterLink` adds leader tracking and retries on top.

Fail fast: every channel watches its socket's monitor events, so :meth:`Connections.refusing`
can tell that every peer has refused connections for ``refused_timeout`` seconds, and the
waiting calls stop at once with a ``ClusterUnavailableError`` that says so, instead of
waiting out their deadline (issue #13). :meth:`Connections.peer_call` asks one given peer.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Final

import zmq.asyncio

from raftlog import sockets
from raftlog.client.dealer import CLOSED, DealerChannel, Waiters, next_delivery, raise_if_denied
from raftlog.client.models import MAX_CLIENT_REQUEST_ID
from raftlog.client.report import AttemptLog
from raftlog.errors import ClientClosedError, ClusterUnavailableError
from raftlog.rpc.frames import encode_uint
from raftlog.security.settings import CurveClient

REFUSAL_POLL: Final = 0.05
"""Seconds between checks of the connection states while a call waits (cheap: a dict scan)."""


class Connections:
    """Sockets to the peers, request ids, reachability and the attempt log of every call."""

    def __init__(
        self,
        seeds: Sequence[str],
        ident: bytes,
        *,
        response_timeout: float,
        refused_timeout: float,
        context: zmq.asyncio.Context | None = None,
        curve: CurveClient | None = None,
    ) -> None:
        urls = list(dict.fromkeys(seeds))
        if not urls or not all(isinstance(u, str) and u for u in urls):
            raise ValueError("at least one peer URL (tcp://ip:port) is needed")
        self.ident = ident
        self.response_timeout = response_timeout
        self.refused_timeout = refused_timeout
        self.curve = curve
        self._own_context = context is None
        self.context: zmq.asyncio.Context = context or zmq.asyncio.Context()
        self.waiters = Waiters()
        self._urls = urls
        self._channels: dict[str, DealerChannel] = {}
        self._stream_channels: set[tuple[DealerChannel, Waiters]] = set()
        self._counter = 0
        self._subs: set[zmq.asyncio.Socket] = set()
        self._attempts = AttemptLog()
        self.closed = False

    # -- small helpers ---------------------------------------------------------------------
    @property
    def urls(self) -> tuple[str, ...]:
        """Peer URLs currently tried, in order (the cluster's, once it answered)."""
        return tuple(self._urls)

    @staticmethod
    def now() -> float:
        """The loop clock all deadlines use."""
        return asyncio.get_running_loop().time()

    def new_id(self) -> bytes:
        """Next non-update request id: a 1..2^32-1 counter encoded like ``uint`` (§5.1)."""
        self._counter = self._counter % MAX_CLIENT_REQUEST_ID + 1
        return encode_uint(self._counter)

    def check_open(self) -> None:
        """Raise ``ClientClosedError`` after :meth:`aclose`."""
        if self.closed:
            raise ClientClosedError("the raftlog client is closed")

    def channel(self, url: str) -> DealerChannel:
        """The shared DEALER connected to ``url`` (created on first use)."""
        self.check_open()
        channel = self._channels.get(url)
        if channel is None:
            channel = DealerChannel(self.context, url, self.waiters, self.curve)
            self._channels[url] = channel
        return channel

    def open_stream_channel(self, url: str) -> tuple[DealerChannel, Waiters]:
        """A dedicated DEALER (own connection, own waiters) for one RequestEntries stream."""
        self.check_open()
        waiters = Waiters()
        pair = (DealerChannel(self.context, url, waiters, self.curve), waiters)
        self._stream_channels.add(pair)
        return pair

    async def close_stream_channel(
        self, pair: tuple[DealerChannel, Waiters], linger_ms: int = 0
    ) -> None:
        """Close a channel from :meth:`open_stream_channel`."""
        self._stream_channels.discard(pair)
        await pair[0].aclose(linger_ms)

    def open_subscription(self, url: str, prefix: bytes) -> zmq.asyncio.Socket:
        """A SUB socket following the broadcast at ``url`` (closed by :meth:`aclose` at the
        latest; close it earlier with :meth:`close_subscription`)."""
        self.check_open()
        sock = sockets.client_sub(self.context, url, prefix, curve=self.curve)
        self._subs.add(sock)
        return sock

    def close_subscription(self, sock: zmq.asyncio.Socket) -> None:
        """Close a socket from :meth:`open_subscription`."""
        self._subs.discard(sock)
        sock.close(linger=0)

    def note(self, url: str, what: str) -> None:
        """Remember what a peer did (for the ``ClusterUnavailableError`` report)."""
        self._attempts.note(self.now(), url, what)

    def unavailable(
        self, started: float, what: str, urls: Sequence[str] | None = None
    ) -> ClusterUnavailableError:
        """The error for a call that started at ``started`` and could not finish, saying
        what each peer of ``urls`` (default: all) did and the likely cause."""
        targets = list(self._urls if urls is None else urls)
        states = {u: c.state for u, c in self._channels.items()}
        return self._attempts.unavailable(
            started=started, now=self.now(), what=what, urls=targets, states=states
        )

    # -- fail fast -------------------------------------------------------------------------
    def connect_all(self) -> None:
        """Open a connection to every known peer, so that their refusals (if any) are all
        noticed within one ``refused_timeout`` rather than one peer after the other."""
        for url in self._urls:
            self.channel(url)

    def refusing(self, urls: Sequence[str] | None = None) -> bool:
        """True when every peer of ``urls`` (default: all) has refused connections, without
        one success, for at least ``refused_timeout`` seconds."""
        now = self.now()
        for url in self._urls if urls is None else urls:
            channel = self._channels.get(url)
            refused = None if channel is None else channel.state.refusing_for(now)
            if refused is None or refused < self.refused_timeout:
                return False
        return True

    async def send(self, url: str, frames: list[bytes], timeout: float) -> bool:
        """Queue ``frames`` for the peer at ``url``; False (noted as "unreachable") if it
        cannot be written within ``timeout`` seconds, or at once (noted as "refused") while
        the peer refuses connections: nothing is queued for it until a reconnection succeeds
        (``DealerChannel.send``), so the caller had better try another peer."""
        channel = self.channel(url)
        deadline = self.now() + timeout
        while True:
            remaining = max(0.0, deadline - self.now())
            if await channel.send(frames, min(REFUSAL_POLL, remaining)):
                return True
            state = channel.state
            if state.refused_since is not None and not state.connected:
                self.note(url, "refused")
                return False
            if self.now() >= deadline or channel.closed:
                self.note(url, "unreachable")
                return False

    async def peer_call(
        self,
        url: str,
        frames: list[bytes],
        *,
        deadline: float,
        started: float,
        fail_fast: bool = False,
        patience: float = 0.0,
    ) -> list[bytes]:
        """Send ``frames`` to the peer at ``url`` (no leader involved); the frames of its
        first answer (id frame first). Silence longer than ``response_timeout`` (plus
        ``patience``: a request the peer may hold, a waiting read) resends the
        same frames, so use it for idempotent requests; ``ClusterUnavailableError`` once
        ``deadline`` passes -- or, with ``fail_fast``, once the peer has refused connections
        for ``refused_timeout`` (a peer that is down, rather than one that is restarting:
        one peer is not the cluster, so waiting for it is the default)."""
        with self.waiters.register(frames[0]) as inbox:
            while True:
                remaining = deadline - self.now()
                if remaining <= 0:
                    raise self.unavailable(started, "no answer", [url])
                wait = min(self.response_timeout + patience, remaining)
                if not await self.send(url, frames, wait):
                    if fail_fast and self.refusing([url]):
                        raise self.unavailable(started, "no answer", [url])
                    continue
                delivery = await next_delivery(inbox, min(wait, deadline - self.now()))
                if delivery is CLOSED:
                    raise ClientClosedError("the raftlog client is closed")
                if delivery is not None:
                    raise_if_denied(delivery.frames)
                    return delivery.frames
                self.note(url, "no response")

    async def close_sockets(self) -> None:
        """Wake every waiting call with ``ClientClosedError`` and close every socket."""
        self.closed = True
        self.waiters.close()
        for channel, waiters in list(self._stream_channels):
            waiters.close()
            await channel.aclose()
        self._stream_channels.clear()
        for channel in self._channels.values():
            await channel.aclose()
        for sock in list(self._subs):
            self.close_subscription(sock)
        if self._own_context:
            self.context.destroy(linger=0)
