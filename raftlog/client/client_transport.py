"""``ClientTransport``: what ``RaftClient`` lends the layers above it (docs/client.md).

Why a module of its own: ``RaftClient`` holds two concerns. Its core RPCs follow the
protocol's messages one by one (docs/protocol.md §10); the transport it offers besides --
requests of any type routed to the leader with the same retries (:meth:`leader_request`),
requests to one given peer (:meth:`peer_request`), broadcast sockets, and its view of the
cluster link (ident, leader, peer URLs) -- is what ``TopicClient``, the ``Subscriber`` and
``raftlog-admin`` are built on, and changes with them. ``RaftClient`` inherits this class,
so every name is still a ``RaftClient`` attribute; ``RaftClient.__init__`` builds the link.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

import zmq.asyncio

from raftlog.client.routing import ClusterLink, Outcome
from raftlog.rpc.messages import Peer

T = TypeVar("T")


class ClientTransport:
    """The cluster transport of a :class:`~raftlog.client.client.RaftClient`, for the layers
    above it; a base of ``RaftClient``, not used alone (``RaftClient`` sets the attributes)."""

    _link: ClusterLink
    timeout: float
    """Default overall deadline of a call, in seconds."""

    # -- what the client knows -------------------------------------------------------------
    @property
    def ident(self) -> bytes:
        """The cluster ident sent in every request."""
        return self._link.ident

    @property
    def context(self) -> zmq.asyncio.Context:
        """The ZeroMQ context of this client's sockets (subscribers reuse it)."""
        return self._link.context

    @property
    def leader(self) -> Peer | None:
        """The leader as last learned, or None while unknown."""
        return self._link.leader

    @property
    def peer_urls(self) -> tuple[str, ...]:
        """The peer URLs in use: the seeds until the cluster reported its configuration."""
        return self._link.urls

    @property
    def response_timeout(self) -> float:
        """Seconds of silence before another peer is tried."""
        return self._link.response_timeout

    def invalidate_leader(self) -> None:
        """Forget the leader, so the next call rediscovers it (used on broadcast silence)."""
        self._link.forget_leader()

    def _window(self, timeout: float | None) -> tuple[float, float]:
        self._link.check_open()
        started = self._link.now()
        return started, started + (self.timeout if timeout is None else timeout)

    # -- the transport, for requests of other layers ---------------------------------------
    async def leader_request(
        self,
        msg_type: bytes,
        args: Sequence[bytes],
        interpret: Callable[[list[bytes], str], Outcome[T]],
        *,
        request_id: bytes | None = None,
        final_from_any: bool = False,
        timeout: float | None = None,
    ) -> T:
        """Send ``[id, msg_type, ident, *args]`` to the leader, with the retries of the core
        RPCs, until ``interpret`` gives a final answer.

        ``interpret(frames, url)`` gets the answer's frames after the id and returns
        ``Done(value)``, ``Redirect(leader_id)`` ("not leader": follow it), ``WAIT`` (an
        interim answer) -- or raises a final error (``RemoteProtocolError`` marks the answer
        malformed and waits on). ``request_id``: the id frame, resent unchanged on retries
        (an update's 12-byte request id; default: a fresh counter id). ``final_from_any``:
        accept a final answer from a peer asked earlier (true for updates: a late "done"
        about the same request id is still true)."""
        started, deadline = self._window(timeout)
        link = self._link
        frames = [link.new_id() if request_id is None else bytes(request_id), msg_type]
        frames += [link.ident, *args]

        def raw(answer: list[bytes], url: str) -> Outcome[T]:
            return interpret(answer[1:], url)

        return await link.leader_call(
            frames, raw, deadline=deadline, started=started, final_from_any=final_from_any
        )

    async def peer_request(
        self,
        url: str,
        msg_type: bytes,
        args: Sequence[bytes],
        *,
        fail_fast: bool = False,
        timeout: float | None = None,
        patience: float = 0.0,
    ) -> list[bytes]:
        """Send ``[id, msg_type, ident, *args]`` to the peer at ``url`` (leader or not) and
        return the frames after the id of its answer. Silence longer than
        ``response_timeout`` (+ ``patience``) resends the same frames (idempotent requests only);
        ``ClusterUnavailableError`` after ``timeout``. A refusing peer is waited for (it
        may be restarting) unless ``fail_fast``: then the call gives up once the peer has
        refused connections for ``refused_timeout`` (an operator asking one peer that is
        down wants to hear it at once)."""
        started, deadline = self._window(timeout)
        link = self._link
        frames = [link.new_id(), msg_type, link.ident, *args]
        answer = await link.peer_call(
            url, frames, deadline=deadline, started=started, fail_fast=fail_fast, patience=patience
        )
        return answer[1:]

    def open_broadcast_socket(self, url: str, prefix: bytes | None = None) -> zmq.asyncio.Socket:
        """A SUB socket on the broadcast at ``url`` filtered to ``prefix`` (default: this
        cluster's ident); the client closes it at the latest on :meth:`aclose` (see also
        :meth:`close_broadcast_socket`)."""
        return self._link.open_subscription(url, self.ident if prefix is None else prefix)

    def close_broadcast_socket(self, sock: zmq.asyncio.Socket) -> None:
        """Close a socket from :meth:`open_broadcast_socket`."""
        self._link.close_subscription(sock)
