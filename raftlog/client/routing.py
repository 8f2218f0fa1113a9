"""``ClusterLink``: the client's view of the cluster and the retry procedure (docs/protocol.md §13).

It owns the sockets (one :class:`DealerChannel` per peer URL, created on first use), the
request-id counter, the peer list learned from RequestConfig answers, the known leader and
the leader discovery, and implements the reference client's recovery procedure:

* no leader known: RequestConfig to the peers in turn until one answers ``is_leader``,
  following "the leader is X" hints, waiting ``election_grace`` when nobody knows a leader;
  one discovery runs at a time and every concurrent call waits for it;
* leader-only RPCs go to the leader's connection only (the reference narrows its socket to
  the leader's URL); a "not leader" answer switches to the named leader, or forgets the
  leader and waits ``election_grace`` when none is named;
* ``response_timeout`` of silence (interim answers restart it) forgets the leader and resends
  the *same* frames (same reqid for updates) through a new discovery, which starts at the
  peer after the silent one;
* every call has an overall deadline; running past it raises ``ClusterUnavailableError``
  listing what each peer answered during the call, and the likely cause
  (:mod:`raftlog.client.report`);
* fail fast: when every peer has refused connections for ``refused_timeout`` seconds (the
  socket monitor tells, see :class:`~raftlog.client.dealer.ConnectionState`), a call stops
  at once with ``ClusterUnavailableError`` instead of waiting out its deadline.

The same machinery serves any request, not only the core RPCs: :meth:`ClusterLink.leader_call`
takes the encoded frames and an interpreter of the raw answer frames (topic publishes and
reads use it), :meth:`ClusterLink.peer_call` asks one given peer (per-peer status,
compaction). Nothing else in the client opens a request socket.

Design note: the reference uses a single round-robin DEALER connected to all peers. One
DEALER per peer gives the same wire behaviour but lets the client know which peer got which
message (for the error report), and one slow request never reconnects the socket under the
other requests in flight. Idle connections to non-leaders stay open until ``aclose``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final, Generic, TypeAlias, TypeVar

import zmq.asyncio

from raftlog import sockets
from raftlog.client.dealer import (
    CLOSED,
    DealerChannel,
    Inbox,
    Waiters,
    cancel_and_wait,
    next_delivery,
)
from raftlog.client.models import MAX_CLIENT_REQUEST_ID
from raftlog.client.report import AttemptLog
from raftlog.errors import ClientClosedError, ClusterUnavailableError, RemoteProtocolError
from raftlog.rpc import decode_response, encode_request
from raftlog.rpc.frames import encode_uint
from raftlog.rpc.messages import (
    Peer,
    Request,
    RequestConfig,
    RequestConfigResponse,
    Response,
)

T = TypeVar("T")

REFUSAL_POLL: Final = 0.05
"""Seconds between checks of the connection states while a call waits (cheap: a dict scan)."""


@dataclass(frozen=True, slots=True)
class Done(Generic[T]):
    """Final answer of a leader RPC."""

    value: T


@dataclass(frozen=True, slots=True)
class Redirect:
    """ "Not leader": ``leader_id`` is the responder's idea of the leader, if any."""

    leader_id: str | None


class Wait:
    """Interim answer ("accepted"): keep waiting, restart the response timeout."""


WAIT: Final = Wait()
Outcome: TypeAlias = Done[T] | Redirect | Wait
Interpreter: TypeAlias = Callable[[list[bytes], str], "Outcome[T]"]
"""Turns the frames of an answer (id frame first) and the URL it came from into an outcome,
or raises a final error; ``RemoteProtocolError`` marks the answer malformed (skipped)."""


class ClusterLink:
    """Connections, leader tracking and the retry loop shared by every client call."""

    def __init__(
        self,
        seeds: Sequence[str],
        ident: bytes,
        *,
        response_timeout: float,
        election_grace: float,
        refused_timeout: float,
        context: zmq.asyncio.Context | None = None,
    ) -> None:
        urls = list(dict.fromkeys(seeds))
        if not urls or not all(isinstance(u, str) and u for u in urls):
            raise ValueError("at least one peer URL (tcp://ip:port) is needed")
        self.ident = ident
        self.response_timeout = response_timeout
        self.election_grace = election_grace
        self.refused_timeout = refused_timeout
        self._own_context = context is None
        self.context: zmq.asyncio.Context = context or zmq.asyncio.Context()
        self.waiters = Waiters()
        self._urls = urls
        self._peers: dict[str, str] = {}
        self.leader: Peer | None = None
        self._rr = len(urls) - 1
        self._channels: dict[str, DealerChannel] = {}
        self._stream_channels: set[tuple[DealerChannel, Waiters]] = set()
        self._counter = 0
        self._subs: set[zmq.asyncio.Socket] = set()
        self._attempts = AttemptLog()
        self._discovery: asyncio.Task[None] | None = None
        self.closed = False

    # -- small helpers ---------------------------------------------------------------------
    @property
    def urls(self) -> tuple[str, ...]:
        """Peer URLs currently tried, in order (the cluster's, once it answered)."""
        return tuple(self._urls)

    @property
    def peers(self) -> dict[str, str]:
        """Peer id -> URL, as last reported by the cluster."""
        return dict(self._peers)

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
            channel = self._channels[url] = DealerChannel(self.context, url, self.waiters)
        return channel

    def open_stream_channel(self, url: str) -> tuple[DealerChannel, Waiters]:
        """A dedicated DEALER (own connection, own waiters) for one RequestEntries stream."""
        self.check_open()
        waiters = Waiters()
        pair = (DealerChannel(self.context, url, waiters), waiters)
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
        sock = sockets.client_sub(self.context, url, prefix)
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

    # -- peers and leader ------------------------------------------------------------------
    def apply_config(self, resp: RequestConfigResponse, url: str) -> None:
        """Adopt the peer list of a RequestConfig answer from ``url`` and its leader info."""
        if resp.peers:
            self._peers = {p.id: p.url for p in resp.peers}
            urls = [p.url for p in resp.peers]
            if urls != self._urls:
                self._urls = urls
                self._rr = min(self._rr, len(urls) - 1)
        if resp.is_leader:
            self.leader = Peer(resp.leader_id or url, url)
        else:
            self.leader_hint(resp.leader_id, url)

    def leader_hint(self, leader_id: str | None, responder: str) -> str | None:
        """Follow "the leader is ``leader_id``" from ``responder``; its URL, or None (and the
        leader forgotten) when no leader is named or its URL is unknown."""
        url = self._peers.get(leader_id) if leader_id is not None else None
        if url is None or url == responder:
            self.forget_leader()
            return None
        self.leader = Peer(leader_id or url, url)
        return url

    def known_leader(self) -> Peer | None:
        """The leader as currently known (a method, so callers re-read it after awaits)."""
        return self.leader

    def forget_leader(self, url: str | None = None) -> None:
        """Forget the leader (only if it is at ``url``, when given); discovery restarts after
        the forgotten peer."""
        leader = self.leader
        if leader is None or (url is not None and leader.url != url):
            return
        self.leader = None
        if leader.url in self._urls:
            self._rr = self._urls.index(leader.url)

    def next_url(self) -> str:
        """The next peer URL in rotation."""
        self._rr = (self._rr + 1) % len(self._urls)
        return self._urls[self._rr]

    # -- discovery -------------------------------------------------------------------------
    async def leader_url(self, deadline: float, started: float) -> str:
        """The leader's URL, running (or joining) a discovery if none is known."""
        while True:
            self.check_open()
            if self.leader is not None:
                return self.leader.url
            self.connect_all()
            task = self._discovery
            if task is None or task.done():
                task = self._discovery = asyncio.get_running_loop().create_task(
                    self._discover(deadline), name="raftlog-client-discovery"
                )
                task.add_done_callback(_retrieve)
            while not task.done():
                remaining = deadline - self.now()
                if remaining <= 0:
                    raise self.unavailable(started, "no leader found")
                if self.refusing():
                    await cancel_and_wait(task)  # nobody to discover: stop knocking
                    raise self.unavailable(started, "no leader found")
                await asyncio.wait({task}, timeout=min(REFUSAL_POLL, remaining))
            failed = not task.cancelled() and task.exception() is not None
            if failed and self.now() >= deadline:
                raise self.unavailable(started, "no leader found")

    async def _discover(self, deadline: float) -> None:
        while self.leader is None:
            remaining = deadline - self.now()
            if remaining <= 0:
                raise ClusterUnavailableError("no leader found")
            url = self.next_url()
            resp = await self.ask(url, RequestConfig(), min(self.response_timeout, remaining))
            if not isinstance(resp, RequestConfigResponse):
                continue
            self.apply_config(resp, url)
            if resp.is_leader:
                self.note(url, "leader")
            elif self.known_leader() is not None:  # follow the hint; if wrong, redirected later
                self.note(url, f"not leader (leader {resp.leader_id})")
            else:
                self.note(url, "not leader (no leader known)")
                await asyncio.sleep(max(0.0, min(self.election_grace, deadline - self.now())))

    # -- request/response primitives -------------------------------------------------------
    async def ask(self, url: str, msg: Request, timeout: float) -> Response | None:
        """One request to ``url`` with a fresh id; its first valid response, or None after
        ``timeout`` seconds (noted as the peer's outcome)."""
        req_id = self.new_id()
        frames = encode_request(msg, ident=self.ident, id=req_id)
        deadline = self.now() + timeout
        with self.waiters.register(req_id) as inbox:
            if not await self.send(url, frames, timeout):
                return None
            while True:
                delivery = await next_delivery(inbox, deadline - self.now())
                if delivery is None:
                    self.note(url, "no response")
                    return None
                if delivery is CLOSED:
                    raise ClientClosedError("the raftlog client is closed")
                try:
                    return decode_response(frames[1], delivery.frames)[1]
                except RemoteProtocolError as exc:
                    self.note(delivery.url, f"malformed response ({exc})")

    async def send(self, url: str, frames: list[bytes], timeout: float) -> bool:
        """Queue ``frames`` for the peer at ``url``; False (noted as "refused" or
        "unreachable") if it cannot be written within ``timeout`` seconds, or sooner once
        that peer has refused connections for ``refused_timeout``."""
        channel = self.channel(url)
        deadline = self.now() + timeout
        while True:
            remaining = deadline - self.now()
            if await channel.send(frames, min(REFUSAL_POLL, remaining)):
                return True
            if channel.state.refusing_for(self.now()) is not None and self.refusing([url]):
                self.note(url, "refused")
                return False
            if self.now() >= deadline or channel.closed:
                self.note(url, "refused" if channel.state.refused_since else "unreachable")
                return False

    async def peer_call(
        self, url: str, frames: list[bytes], *, deadline: float, started: float
    ) -> list[bytes]:
        """Send ``frames`` to the peer at ``url`` (no leader involved); the frames of its
        first answer (id frame first). Silence longer than ``response_timeout`` resends the
        same frames, so use it for idempotent requests; ``ClusterUnavailableError`` once
        ``deadline`` passes or the peer refused connections for ``refused_timeout``."""
        with self.waiters.register(frames[0]) as inbox:
            while True:
                remaining = deadline - self.now()
                if remaining <= 0:
                    raise self.unavailable(started, "no answer", [url])
                wait = min(self.response_timeout, remaining)
                if not await self.send(url, frames, wait):
                    if self.refusing([url]):
                        raise self.unavailable(started, "no answer", [url])
                    continue
                delivery = await next_delivery(inbox, min(wait, deadline - self.now()))
                if delivery is CLOSED:
                    raise ClientClosedError("the raftlog client is closed")
                if delivery is not None:
                    return delivery.frames
                self.note(url, "no response")

    async def leader_call(
        self,
        frames: list[bytes],
        interpret: Interpreter[T],
        *,
        deadline: float,
        started: float,
        final_from_any: bool = False,
    ) -> T:
        """Send ``frames`` to the leader until ``interpret`` gives a final answer.

        The same frames (hence the same id) are resent on every retry. Interim and "not
        leader" answers count only from the peer last asked; with ``final_from_any`` a final
        answer is taken from any peer (a late answer about the same reqid is still true).
        """
        req_id = frames[0]
        with self.waiters.register(req_id) as inbox:
            while True:
                url = await self.leader_url(deadline, started)
                remaining = deadline - self.now()
                if remaining <= 0:
                    raise self.unavailable(started, "no final answer")
                if not await self.send(url, frames, min(self.response_timeout, remaining)):
                    self.forget_leader(url)
                    continue
                outcome = await self._await_outcome(
                    inbox,
                    url,
                    interpret=interpret,
                    deadline=deadline,
                    started=started,
                    final_from_any=final_from_any,
                )
                if isinstance(outcome, Done):
                    return outcome.value

    async def _await_outcome(
        self,
        inbox: Inbox,
        url: str,
        *,
        interpret: Interpreter[T],
        deadline: float,
        started: float,
        final_from_any: bool,
    ) -> Done[T] | None:
        """Wait for the answer of ``url``; None means "resend" (timeout or redirect)."""
        while True:
            wait = min(self.response_timeout, deadline - self.now())
            delivery = await next_delivery(inbox, wait)
            if delivery is None:
                if self.now() >= deadline:
                    raise self.unavailable(started, "no final answer")
                self.note(url, "no response")
                self.forget_leader(url)
                return None
            if delivery is CLOSED:
                raise ClientClosedError("the raftlog client is closed")
            from_target = delivery.url == url
            if not (from_target or final_from_any):
                continue
            try:
                outcome = interpret(delivery.frames, delivery.url)
            except RemoteProtocolError as exc:
                self.note(delivery.url, f"malformed response ({exc})")
                continue
            if isinstance(outcome, Done):
                return outcome
            if not from_target or isinstance(outcome, Wait):
                continue
            self.note(url, f"not leader (leader {outcome.leader_id or 'unknown'})")
            if self.leader_hint(outcome.leader_id, url) is None:
                await asyncio.sleep(max(0.0, min(self.election_grace, deadline - self.now())))
            return None

    # -- shutdown --------------------------------------------------------------------------
    async def aclose(self) -> None:
        """Wake every waiting call with ``ClientClosedError`` and close every socket."""
        if self.closed:
            return
        self.closed = True
        if self._discovery is not None:
            await cancel_and_wait(self._discovery)
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


def _retrieve(task: asyncio.Task[None]) -> None:
    if not task.cancelled():
        task.exception()
