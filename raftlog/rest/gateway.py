"""The REST API's way into the cluster: one ``RaftClient`` + ``TopicClient`` per peer,
living on the HTTP listener's event loop.

Why a client and not a call into the node: the consensus loop runs in another thread and
must never wait on HTTP; the one client transport (``raftlog.client``) already does leader
discovery, redirects, resends with the same request id and deadlines. So a follower's REST
API *forwards* writes to the leader through it (no 307 for the caller to follow), and reads
go to this very peer (``url=own_url``): served from its applied state, with the consistency
docs/topics.md states for topic reads.

Read-your-writes through one peer: a write answered by the leader is applied there, but a
follower may apply it a moment later. Before answering a write, the gateway of a follower
waits (bounded by ``catch_up_timeout``) until its own peer has applied the write's index, so
a client that writes and then polls the same peer sees its write.

Waiting for new data (that catch-up, a long poll) parks on the peer's
:class:`~raftlog.server.apply_signal.ApplySignal`, which the consensus thread notifies after
each applied batch: an idle wait costs nothing, and it ends as soon as the data is there.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Final

from raftlog.client.client import RaftClient
from raftlog.security.settings import CurveClient
from raftlog.server.apply_signal import ApplySignal
from raftlog.topics.client import TopicClient

REQUEST_TIMEOUT: Final = 10.0
"""Seconds a forwarded request may take (leader elections included) before 503 (the default
of ``[rest] request_timeout_ms``)."""
CATCH_UP_TIMEOUT: Final = 2.0
"""Seconds a follower's gateway waits for its peer to apply a write it forwarded."""


class ClusterGateway:
    """Owns the client of one peer's REST API (started and closed with the HTTP app)."""

    def __init__(
        self,
        peer_urls: Sequence[str],
        own_url: str,
        ident: str,
        *,
        curve: CurveClient | None = None,
        max_entry_size: int,
        timeout: float = REQUEST_TIMEOUT,
        catch_up_timeout: float = CATCH_UP_TIMEOUT,
        applied: ApplySignal | None = None,
    ) -> None:
        self.own_url = own_url
        self.timeout = timeout
        self._peer_urls = list(peer_urls) or [own_url]
        self._ident = ident
        self._curve = curve
        self._max_entry_size = max_entry_size
        self._catch_up_timeout = catch_up_timeout
        self._client: RaftClient | None = None
        self._topics: TopicClient | None = None
        self.applied = applied if applied is not None else ApplySignal()
        """This peer's applied index, notified by its consensus thread (a gateway built
        without one, in a test, is never notified: its waits run to their time-out)."""
        self.closing = asyncio.Event()
        """Set when the listener shuts down: long polls answer at once instead of holding
        the peer's exit for up to their ``waitMs``."""

    async def start(self) -> None:
        """Create the client on the running (the listener's) loop."""
        self._client = RaftClient(
            self._peer_urls,
            self._ident,
            timeout=self.timeout,
            curve=self._curve,
            max_entry_size=self._max_entry_size,
        )
        self._topics = TopicClient(self._client)

    def shutting_down(self) -> None:
        """The listener is stopping: end every waiting long poll now."""
        self.closing.set()

    async def close(self) -> None:
        """Close the client's sockets (idempotent)."""
        if self._client is not None:
            await self._client.aclose()
            self._client = None
            self._topics = None

    @property
    def topics(self) -> TopicClient:
        """The topic client (after ``start``)."""
        if self._topics is None:
            raise RuntimeError("the REST gateway is not started")
        return self._topics

    @property
    def is_leader(self) -> bool:
        """Whether this peer is the leader as far as the client last heard."""
        leader = self._client.leader if self._client is not None else None
        return leader is not None and leader.url == self.own_url

    async def caught_up(self, index: int) -> None:
        """Wait until this peer has applied ``index`` (a write it forwarded), at most
        ``catch_up_timeout``; the write itself is durable either way."""
        if self.is_leader or self._client is None:
            return
        await self.wait_applied(index - 1, self._catch_up_timeout)

    async def wait_applied(self, index: int, timeout: float) -> bool:
        """Wait until this peer has applied past ``index``, ``timeout`` passed, or the
        listener is stopping; whether it applied past ``index``."""
        if self.applied.applied > index or self.closing.is_set():
            return self.applied.applied > index
        stop = asyncio.ensure_future(self.closing.wait())
        wait = asyncio.ensure_future(self.applied.wait_beyond(index, timeout))
        try:
            await asyncio.wait((stop, wait), return_when=asyncio.FIRST_COMPLETED)
        finally:
            stop.cancel()
            wait.cancel()
        return self.applied.applied > index
