"""``SyncRaftClient``: a blocking facade over :class:`RaftClient` for scripts and Spark tasks.

A private event loop runs in a daemon thread; every method submits the corresponding
coroutine to it and blocks until it finishes, so the facade works the same from plain
scripts, from threads and from inside someone else's running event loop. ZeroMQ sockets
are only ever touched by the loop thread. Always ``close()`` it (or use ``with``).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import threading
from collections.abc import Coroutine, Generator, Iterator, Sequence
from types import TracebackType
from typing import Any, Final, TypeVar

from raftlog.client.client import RaftClient
from raftlog.client.entries import EntryStream
from raftlog.client.models import (
    DEFAULT_TIMEOUT,
    ELECTION_GRACE,
    MAX_ENTRY_DATA_SIZE,
    REFUSED_TIMEOUT,
    RESPONSE_TIMEOUT,
    ClusterInfo,
    StreamItem,
)
from raftlog.errors import ClientClosedError
from raftlog.rpc.messages import Peer, RequestLogInfoResponse
from raftlog.security.settings import CurveClient

T = TypeVar("T")


ITEMS_PER_HANDOFF: Final = 1024
"""Stream items taken per round trip to the loop thread. One item per round trip cost
~50 µs of thread handoff each (py-spy: a joining peer's RequestEntries catch-up ran at
~20k entries/s, most of it in ``Condition.wait`` and the selector); a batch of entries
arrives in one message anyway."""


async def _next_items(
    stream: EntryStream, limit: int
) -> tuple[list[StreamItem], bool, BaseException | None]:
    """Up to ``limit`` items; then whether the stream ended, and the error that ended it
    (raised by the caller once the items before it are handed out)."""
    items: list[StreamItem] = []
    try:
        while len(items) < limit:
            items.append(await stream.__anext__())
    except StopAsyncIteration:
        return items, True, None
    except Exception as exc:
        if not items:
            raise
        return items, True, exc
    return items, False, None


class SyncRaftClient:
    """Blocking twin of :class:`RaftClient`; same arguments, same methods, same errors.

    Use as ``with SyncRaftClient(peers, ident) as client:``. ``request_entries`` returns a
    plain iterator; leaving it early (``break``) stops the server-side stream.
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
        curve: CurveClient | None = None,
    ) -> None:
        self._closed = False
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, name="raftlog-sync-client", daemon=True)
        self._thread.start()
        options: dict[str, Any] = {
            "timeout": timeout,
            "response_timeout": response_timeout,
            "election_grace": election_grace,
            "refused_timeout": refused_timeout,
            "max_entry_size": max_entry_size,
            "curve": curve,
        }
        try:
            self._client = self._call(self._create(peers, ident, options))
        except BaseException:
            self._stop_loop()
            raise

    @staticmethod
    async def _create(peers: Sequence[str], ident: str | bytes, options: Any) -> RaftClient:
        return RaftClient(peers, ident, **options)

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        try:
            self._loop.run_forever()
        finally:
            self._loop.run_until_complete(self._loop.shutdown_asyncgens())
            self._loop.close()

    def _call(self, coro: Coroutine[Any, Any, T]) -> T:
        if self._closed:
            coro.close()
            raise ClientClosedError("the raftlog client is closed")
        if threading.current_thread() is self._thread:
            coro.close()
            raise RuntimeError("SyncRaftClient cannot be used from its own event loop thread")
        future: concurrent.futures.Future[T] = asyncio.run_coroutine_threadsafe(coro, self._loop)
        try:
            return future.result()
        except BaseException:
            future.cancel()  # e.g. KeyboardInterrupt: do not leave the call running
            raise

    # -- lifecycle -------------------------------------------------------------------------
    def __enter__(self) -> SyncRaftClient:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        """Close the client and stop its thread (idempotent)."""
        if self._closed:
            return
        try:
            self._call(self._client.aclose())
        finally:
            self._closed = True
            self._stop_loop()

    def _stop_loop(self) -> None:
        self._closed = True
        if self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=10.0)

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

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` on this facade's loop thread and block until it is done (how other
        blocking facades share this one's thread instead of starting their own)."""
        return self._call(coro)

    # -- RPCs ------------------------------------------------------------------------------
    def request_config(self, *, timeout: float | None = None) -> ClusterInfo:
        """See :meth:`RaftClient.request_config`."""
        return self._call(self._client.request_config(timeout=timeout))

    def request_log_info(
        self,
        *,
        any_peer: bool = False,
        peer_url: str | None = None,
        fail_fast: bool = False,
        timeout: float | None = None,
    ) -> RequestLogInfoResponse:
        """See :meth:`RaftClient.request_log_info`."""
        return self._call(
            self._client.request_log_info(
                any_peer=any_peer, peer_url=peer_url, fail_fast=fail_fast, timeout=timeout
            )
        )

    def peer_request(
        self,
        url: str,
        msg_type: bytes,
        args: Sequence[bytes],
        *,
        fail_fast: bool = False,
        timeout: float | None = None,
    ) -> list[bytes]:
        """See :meth:`RaftClient.peer_request`."""
        return self._call(
            self._client.peer_request(url, msg_type, args, fail_fast=fail_fast, timeout=timeout)
        )

    def request_update(
        self, data: bytes, request_id: bytes | None = None, *, timeout: float | None = None
    ) -> int:
        """See :meth:`RaftClient.request_update`."""
        return self._call(self._client.request_update(data, request_id, timeout=timeout))

    def config_update(
        self,
        peers: Sequence[Peer] | Sequence[tuple[str, str]],
        *,
        request_id: bytes | None = None,
        timeout: float | None = None,
    ) -> int:
        """See :meth:`RaftClient.config_update`."""
        return self._call(self._client.config_update(peers, request_id=request_id, timeout=timeout))

    def request_broadcast_url(self, *, timeout: float | None = None) -> str:
        """See :meth:`RaftClient.request_broadcast_url`."""
        return self._call(self._client.request_broadcast_url(timeout=timeout))

    def request_entries(
        self,
        prev_index: int = 0,
        count: int | None = None,
        *,
        timeout: float | None = None,
        from_peer: str | None = None,
        consistency: str = "any",
        min_index: int | None = None,
    ) -> Iterator[StreamItem]:
        """See :meth:`RaftClient.request_entries`; returns a blocking iterator. Items cross
        from the client's loop thread ``ITEMS_PER_HANDOFF`` at a time (or fewer, at the end
        of the stream), so the first one is handed out once that many have arrived."""
        stream = self._call(
            self._open_stream(
                prev_index, count, timeout,
                from_peer=from_peer, consistency=consistency, min_index=min_index,
            )
        )
        return self._iterate(stream)

    async def _open_stream(
        self,
        prev_index: int,
        count: int | None,
        timeout: float | None,
        *,
        from_peer: str | None = None,
        consistency: str = "any",
        min_index: int | None = None,
    ) -> EntryStream:
        return self._client.request_entries(
            prev_index, count, timeout=timeout, from_peer=from_peer,
            consistency=consistency, min_index=min_index,
        )

    def _iterate(self, stream: EntryStream) -> Generator[StreamItem, None, None]:
        try:
            while True:
                items, ended, error = self._call(_next_items(stream, ITEMS_PER_HANDOFF))
                yield from items
                if error is not None:
                    raise error
                if ended:
                    return
        finally:
            if not self._closed:
                with contextlib.suppress(ClientClosedError, RuntimeError):
                    self._call(stream.aclose())
