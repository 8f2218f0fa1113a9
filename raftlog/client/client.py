"""``RaftClient``: the asyncio client of a raftlog / zmq-raft cluster (docs/protocol.md §10, §13).

Usage::

    async with RaftClient(["tcp://127.0.0.1:8047"], ident="raftlog-local") as client:
        index = await client.request_update(b"payload")
        async for item in client.request_entries(0):
            ...

The client is lazy: nothing is sent before the first call, which discovers the cluster (its
peer list and leader) with RequestConfig. Retries, leader following and timeouts are
described in :mod:`raftlog.client.routing`; every call takes an optional ``timeout`` (seconds,
all retries included) and raises ``ClusterUnavailableError`` when it runs out -- or sooner,
after ``refused_timeout`` seconds, when every peer refuses the connection.

Besides the core RPCs the client offers its transport to the layers above it:
:meth:`RaftClient.leader_request` (any request type, routed to the leader with the same
retries) and :meth:`RaftClient.peer_request` (one given peer). ``TopicClient``, the
``Subscriber`` and ``raftlog-admin`` are built on these; none opens a request socket itself.
They are defined with the client's view of its link in the base class
:class:`~raftlog.client.client_transport.ClientTransport`.
"""

from __future__ import annotations

import contextlib
import functools
import weakref
from collections.abc import Callable, Sequence
from typing import TypeVar

import zmq.asyncio

from raftlog.client.answers import config_update_outcome, unexpected, update_outcome
from raftlog.client.client_transport import ClientTransport
from raftlog.client.consistency import read_level
from raftlog.client.entries import EntryStream
from raftlog.client.models import (
    DEFAULT_TIMEOUT,
    ELECTION_GRACE,
    MAX_ENTRY_DATA_SIZE,
    REFUSED_TIMEOUT,
    RESPONSE_TIMEOUT,
    ClusterInfo,
    to_peers,
)
from raftlog.client.routing import ClusterLink, Done, Interpreter, Outcome, Redirect
from raftlog.entry import REQUEST_ID_SIZE
from raftlog.errors import EntryTooLargeError, RemoteProtocolError
from raftlog.ids import RequestIdGenerator
from raftlog.rpc import decode_response, encode_request
from raftlog.rpc.messages import (
    TYPE_CONFIG_UPDATE,
    TYPE_REQUEST_BROADCAST_STATE_URL,
    TYPE_REQUEST_CONFIG,
    TYPE_REQUEST_LOG_INFO,
    TYPE_REQUEST_UPDATE,
    ConfigUpdate,
    Peer,
    RequestBroadcastStateUrl,
    RequestBroadcastStateUrlResponse,
    RequestConfig,
    RequestConfigResponse,
    RequestLogInfo,
    RequestLogInfoResponse,
    RequestUpdate,
    Response,
)
from raftlog.security.settings import CurveClient

T = TypeVar("T")


def _typed(msg_type: bytes, interpret: Callable[[Response, str], Outcome[T]]) -> Interpreter[T]:
    """An interpreter of raw answer frames that decodes them as ``msg_type``'s response."""

    def raw(frames: list[bytes], url: str) -> Outcome[T]:
        return interpret(decode_response(msg_type, frames)[1], url)

    return raw


class RaftClient(ClientTransport):
    """Leader-following, retrying asyncio client; use as ``async with RaftClient(...)``.

    ``peers``: seed ROUTER URLs (any subset of the cluster); ``ident``: the cluster ident
    (a wrong ident makes every peer silent, so calls end in ``ClusterUnavailableError``);
    ``timeout``: default overall deadline of a call; ``response_timeout``: silence after which
    the next peer is tried; ``election_grace``: pause when no peer knows a leader;
    ``refused_timeout``: once every peer has refused connections this long, calls fail
    with ``ClusterUnavailableError`` at once instead of waiting for ``timeout``;
    ``max_entry_size``: the cluster's ``max_log_entry_data_size`` -- larger updates raise
    ``EntryTooLargeError`` before anything is sent (the protocol has no way to ask a peer for
    it, and a peer silently ignores an oversized update, so the default is the peers' own
    default, 10 MiB; set it when the cluster configures another limit);
    ``context``: a ``zmq.asyncio.Context`` to share (default: a private one).
    ``curve``: the client's CURVE keys for a secure cluster (``raftlog.security.settings.
    client_security`` reads them from a cluster file); plaintext when None.
    Update retries always reuse the request id, so an update is applied at most once.
    """

    def __init__(
        self,
        peers: Sequence[str],
        ident: str | bytes,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        response_timeout: float = RESPONSE_TIMEOUT,
        election_grace: float = ELECTION_GRACE,
        refused_timeout: float = REFUSED_TIMEOUT,
        max_entry_size: int = MAX_ENTRY_DATA_SIZE,
        context: zmq.asyncio.Context | None = None,
        curve: CurveClient | None = None,
    ) -> None:
        if isinstance(peers, str):
            peers = [peers]
        if timeout <= 0 or response_timeout <= 0 or election_grace < 0 or refused_timeout <= 0:
            raise ValueError("timeouts must be positive")
        if max_entry_size < 1:
            raise ValueError("max_entry_size must be at least 1 byte")
        self.timeout = timeout
        self.max_entry_size = max_entry_size
        """Largest update data sent (the cluster's ``max_log_entry_data_size``)."""
        self._link = ClusterLink(
            list(peers),
            ident.encode() if isinstance(ident, str) else bytes(ident),
            response_timeout=response_timeout,
            election_grace=election_grace,
            refused_timeout=refused_timeout,
            context=context,
            curve=curve,
        )
        self._ids = RequestIdGenerator()
        self._streams: weakref.WeakSet[EntryStream] = weakref.WeakSet()
        self.last_written = 0  # highest index this client wrote (read_your_writes default)

    # -- lifecycle -------------------------------------------------------------------------
    async def __aenter__(self) -> RaftClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close every stream and socket; waiting calls raise ``ClientClosedError``."""
        for stream in list(self._streams):
            with contextlib.suppress(Exception):
                await stream.aclose()
        await self._link.aclose()

    @property
    def closed(self) -> bool:
        """True once :meth:`aclose` ran."""
        return self._link.closed

    # -- what the client knows -------------------------------------------------------------
    def check_entry_size(self, data: bytes) -> None:
        """Raise ``EntryTooLargeError`` if ``data`` exceeds :attr:`max_entry_size`."""
        if len(data) > self.max_entry_size:
            raise EntryTooLargeError(len(data), self.max_entry_size)

    def new_request_id(self) -> bytes:
        """A fresh 12-byte update request id (§3); pass it to retry an update idempotently."""
        return self._ids.next()

    # -- RPCs ------------------------------------------------------------------------------
    async def request_config(self, *, timeout: float | None = None) -> ClusterInfo:
        """The leader's RequestConfig answer (§10.1); also refreshes the peer list."""
        started, deadline = self._window(timeout)
        link = self._link

        def interpret(resp: Response, url: str) -> Outcome[ClusterInfo]:
            if not isinstance(resp, RequestConfigResponse):
                raise unexpected(resp)
            if not resp.is_leader:
                return Redirect(resp.leader_id)
            link.apply_config(resp, url)
            return Done(ClusterInfo(resp.leader_id, resp.peers, resp.is_leader))

        frames = encode_request(RequestConfig(), ident=link.ident, id=link.new_id())
        return await link.leader_call(
            frames, _typed(TYPE_REQUEST_CONFIG, interpret), deadline=deadline, started=started
        )

    async def request_log_info(
        self,
        *,
        any_peer: bool = False,
        peer_url: str | None = None,
        fail_fast: bool = False,
        timeout: float | None = None,
    ) -> RequestLogInfoResponse:
        """RequestLogInfo (§10.2) from the leader, from whichever peer answers first when
        ``any_peer`` is true (its ``is_leader`` / ``leader_id`` say who answered), or from
        the peer at ``peer_url`` (its own view: status pages, "is this peer caught up";
        ``fail_fast`` as in :meth:`peer_request`)."""
        started, deadline = self._window(timeout)
        link = self._link
        if peer_url is not None:
            frames = encode_request(RequestLogInfo(), ident=link.ident, id=link.new_id())
            answer = await link.peer_call(
                peer_url, frames, deadline=deadline, started=started, fail_fast=fail_fast
            )
            info = decode_response(TYPE_REQUEST_LOG_INFO, answer)[1]
            if not isinstance(info, RequestLogInfoResponse):
                raise RemoteProtocolError("RequestLogInfo answered with another message")
            return info
        if any_peer:
            link.connect_all()
            while (wait := min(link.response_timeout, deadline - link.now())) > 0:
                url = link.next_url()
                got = await link.ask(url, RequestLogInfo(), wait)
                if isinstance(got, RequestLogInfoResponse):
                    return got
                if link.refusing():
                    break
            raise link.unavailable(started, "no answer")

        def interpret(resp: Response, url: str) -> Outcome[RequestLogInfoResponse]:
            if not isinstance(resp, RequestLogInfoResponse):
                raise unexpected(resp)
            return Done(resp) if resp.is_leader else Redirect(resp.leader_id)

        frames = encode_request(RequestLogInfo(), ident=link.ident, id=link.new_id())
        return await link.leader_call(
            frames, _typed(TYPE_REQUEST_LOG_INFO, interpret), deadline=deadline, started=started
        )

    async def request_update(
        self, data: bytes, request_id: bytes | None = None, *, timeout: float | None = None
    ) -> int:
        """Append ``data`` to the log; returns its index once the leader has applied it.

        ``request_id`` (12 bytes, default: fresh) makes the call idempotent: resending the
        same id, here or after a crash, never appends twice while the id is remembered
        (8 h by default). Raises ``ValueError`` for empty data (the protocol would silently
        ignore it), ``EntryTooLargeError`` above :attr:`max_entry_size` (a peer would silently
        ignore that too), ``RequestExpiredError`` if the leader finds the id's timestamp outside
        its acceptance window (§3.1), ``ClusterUnavailableError`` after ``timeout``.
        """
        data = bytes(data)
        if not data:
            raise ValueError("update data must hold at least one byte")
        self.check_entry_size(data)
        rid = self._ids.next() if request_id is None else bytes(request_id)
        if len(rid) != REQUEST_ID_SIZE:
            raise ValueError(f"request_id must be {REQUEST_ID_SIZE} bytes, got {len(rid)}")
        started, deadline = self._window(timeout)

        frames = encode_request(RequestUpdate(rid, data), ident=self.ident)
        interpret = _typed(TYPE_REQUEST_UPDATE, functools.partial(update_outcome, rid))
        index = await self._link.leader_call(
            frames, interpret, deadline=deadline, started=started, final_from_any=True
        )
        return self.note_written(index)

    def note_written(self, index: int) -> int:
        """Remember ``index`` as written (``read_your_writes`` waits for it); returns it."""
        self.last_written = max(self.last_written, index)
        return index

    async def config_update(
        self,
        peers: Sequence[Peer] | Sequence[tuple[str, str]],
        *,
        request_id: bytes | None = None,
        timeout: float | None = None,
    ) -> int:
        """Change the membership to ``peers`` (the complete new list, §10.4, §12.4).

        Returns the index of the joint C(old,new) entry, answered once C(new) has been
        appended. Status 2 raises ``ConfigUpdateError(2, name, message)``; status 3 ("busy":
        another change is in progress) raises ``ConfigUpdateError(3, ...)`` at once rather
        than retrying, because waiting could apply this change on top of someone else's;
        call again once that change is done. Status 4 raises ``RequestExpiredError``.
        Retries reuse the request id, which the leader answers with "accepted" (status 1).
        """
        new_peers = to_peers(peers)
        if not new_peers:
            raise ValueError("the new configuration needs at least one peer")
        rid = self._ids.next() if request_id is None else bytes(request_id)
        if len(rid) != REQUEST_ID_SIZE:
            raise ValueError(f"request_id must be {REQUEST_ID_SIZE} bytes, got {len(rid)}")
        started, deadline = self._window(timeout)

        frames = encode_request(ConfigUpdate(rid, new_peers), ident=self.ident)
        return await self._link.leader_call(
            frames,
            _typed(TYPE_CONFIG_UPDATE, functools.partial(config_update_outcome, rid)),
            deadline=deadline,
            started=started,
            final_from_any=True,
        )

    async def request_broadcast_url(self, *, timeout: float | None = None) -> str:
        """The PUB URL of the leader's BroadcastStateMachine (§11.1). Every peer answers with
        its own URL, so the request goes to the leader (discovered first if needed)."""
        started, deadline = self._window(timeout)
        link = self._link

        def interpret(resp: Response, url: str) -> Outcome[str]:
            if not isinstance(resp, RequestBroadcastStateUrlResponse):
                raise unexpected(resp)
            return Done(resp.url)

        frames = encode_request(RequestBroadcastStateUrl(), ident=link.ident, id=link.new_id())
        return await link.leader_call(
            frames,
            _typed(TYPE_REQUEST_BROADCAST_STATE_URL, interpret),
            deadline=deadline,
            started=started,
        )

    def request_entries(
        self,
        prev_index: int = 0,
        count: int | None = None,
        *,
        timeout: float | None = None,
        from_peer: str | None = None,
        consistency: str = "any",
        min_index: int | None = None,
    ) -> EntryStream:
        """Stream the log after ``prev_index`` (§10.5): ``IndexedEntry`` items, preceded by
        ``SnapshotChunk`` items when that part of the log was compacted.

        ``count`` bounds the number of entries (a whole snapshot counts as one); without it
        the stream ends at the leader's last applied index at the time of the request.
        ``timeout`` bounds the time without progress. Iterate with ``async for``; leave
        early with ``break`` or, deterministically, ``async with`` / ``aclose()``.

        ``from_peer`` (a URL) asks that peer first, even a follower, for committed entries
        (``any_peer``, docs/protocol.md §10.5), to spread readers over the peers; it serves up
        to its own applied index (the stream may end earlier), and the leader takes over
        when that peer refuses (a reference peer), is silent or breaks off.
        ``consistency`` / ``min_index``: ``raftlog.client.consistency`` (docs/client.md).
        """
        if prev_index < 0 or (count is not None and count < 0):
            raise ValueError("prev_index and count must not be negative")
        self._link.check_open()
        stream = EntryStream(
            self._link,
            prev_index,
            count,
            self.timeout if timeout is None else timeout,
            on_close=self._streams.discard,
            from_peer=from_peer,
            level=read_level(self, consistency, min_index),
        )
        self._streams.add(stream)
        return stream
