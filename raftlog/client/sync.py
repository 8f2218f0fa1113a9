"""``SyncRaftClient``: a blocking facade over :class:`RaftClient` for scripts and Spark tasks.

A private event loop runs in a daemon thread (``raftlog.client.runner.LoopThread``); every
method submits the corresponding coroutine to it and blocks until it finishes, so the facade
works the same from plain scripts, from threads and from inside someone else's running event
loop. ZeroMQ sockets are only ever touched by the loop thread. Always ``close()`` it (or
use ``with``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Coroutine, Iterator, Sequence
from typing import Any, TypeVar

from raftlog.client.blocking import ClosingFace, blocking, blocking_iter
from raftlog.client.client import RaftClient
from raftlog.client.models import (
    DEFAULT_TIMEOUT,
    ELECTION_GRACE,
    MAX_ENTRY_DATA_SIZE,
    REFUSED_TIMEOUT,
    RESPONSE_TIMEOUT,
)
from raftlog.client.runner import ITEMS_PER_HANDOFF, LoopThread
from raftlog.errors import ClientClosedError
from raftlog.rpc.messages import Peer
from raftlog.security.settings import CurveClient

T = TypeVar("T")


class SyncRaftClient(ClosingFace):
    """Blocking twin of :class:`RaftClient`; same arguments, same methods, same errors.

    Use as ``with SyncRaftClient(peers, ident) as client:``. ``request_entries`` returns a
    plain iterator (items cross from the loop thread ``ITEMS_PER_HANDOFF`` at a time, so the
    first one is handed out once that many arrived or the stream ended); leaving it early
    (``break``) stops the server-side stream. The RPC methods delegate to :class:`RaftClient`
    (``raftlog.client.blocking``: its signatures, docstrings and errors); this class adds the
    lifecycle.
    """

    request_config = blocking(RaftClient.request_config)
    request_log_info = blocking(RaftClient.request_log_info)
    peer_request = blocking(RaftClient.peer_request)
    request_update = blocking(RaftClient.request_update)
    config_update = blocking(RaftClient.config_update)
    request_broadcast_url = blocking(RaftClient.request_broadcast_url)
    request_entries = blocking_iter(
        RaftClient.request_entries, batch=ITEMS_PER_HANDOFF, item="StreamItem"
    )

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
        curve: CurveClient | None = None,
    ) -> None:
        self._closed = False
        self._runner = LoopThread("raftlog-sync-client", owner="SyncRaftClient")
        self._runner.start()
        options: dict[str, Any] = {
            "timeout": timeout,
            "response_timeout": response_timeout,
            "election_grace": election_grace,
            "refused_timeout": refused_timeout,
            "max_entry_size": max_entry_size,
            "curve": curve,
        }
        try:
            self._client = self._run(self._create(peers, ident, options))
        except BaseException:
            self._stop_loop()
            raise

    @staticmethod
    async def _create(peers: Sequence[str], ident: str | bytes, options: Any) -> RaftClient:
        return RaftClient(peers, ident, **options)

    def _run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` on the loop thread (refused once closed); an interrupted wait cancels
        it."""
        if self._closed:
            coro.close()
            raise ClientClosedError("the raftlog client is closed")
        return self._runner.run(coro)

    @property
    def _delegate(self) -> RaftClient:
        return self._client

    def _iterate(self, stream: AsyncIterator[T], batch: int) -> Iterator[T]:
        return self._runner.iterate(stream, batch=batch, run=self._run, alive=self._alive)

    def _alive(self) -> bool:
        return not self._closed

    # -- lifecycle -------------------------------------------------------------------------
    def close(self) -> None:
        """Close the client and stop its thread (idempotent)."""
        if self._closed:
            return
        try:
            self._run(self._client.aclose())
        finally:
            self._closed = True
            self._stop_loop()

    def _stop_loop(self) -> None:
        self._closed = True
        self._runner.stop(timeout=10.0)

    @property
    def closed(self) -> bool:
        """True once :meth:`close` ran."""
        return self._closed

    # -- state -----------------------------------------------------------------------------
    @property
    def leader(self) -> Peer | None:
        """The leader as last learned, or None while unknown."""
        return self._client.leader

    @property
    def peer_urls(self) -> tuple[str, ...]:
        """The peer URLs in use."""
        return self._client.peer_urls

    def new_request_id(self) -> bytes:
        """A fresh 12-byte update request id (see :meth:`RaftClient.new_request_id`)."""
        return self._client.new_request_id()

    # -- for blocking facades built on this one (e.g. SyncTopicClient) ---------------------
    @property
    def async_client(self) -> RaftClient:
        """The RaftClient living on this facade's loop thread: touch it only from
        coroutines passed to :meth:`run`."""
        return self._client

    @property
    def runner(self) -> LoopThread:
        """The loop thread this facade runs on (blocking faces built on this one share it
        instead of starting their own)."""
        return self._runner

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` on this facade's loop thread and block until it is done (how other
        blocking facades share this one's thread instead of starting their own)."""
        return self._run(coro)
