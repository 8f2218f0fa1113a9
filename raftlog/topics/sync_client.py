"""``SyncTopicClient``: the blocking twin of :class:`TopicClient`, for scripts and Spark tasks.

It runs on a :class:`SyncRaftClient`'s loop thread (``SyncRaftClient.run``) rather than
starting its own, so the same thread-safety rules hold: every call blocks until done and
works from plain scripts, from threads and from inside someone else's event loop. Methods,
arguments and errors are :class:`TopicClient`'s; ``subscribe`` returns a plain iterator
(leaving it early stops the follower).

Usage::

    with SyncTopicClient(urls, ident) as topics:
        topics.create_topic("orders", retention_ms=86_400_000, exist_ok=True)
        rid = topics.publish("orders", b"payload")
        for item in topics.subscribe(["orders"], from_index=rid.index):
            ...
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Generator, Iterator, Mapping, Sequence
from types import TracebackType
from typing import Any, Literal

from raftlog.client.models import DEFAULT_TIMEOUT
from raftlog.client.sync import SyncRaftClient
from raftlog.errors import ClientClosedError
from raftlog.security.settings import CurveClient
from raftlog.topics import wire as rpc
from raftlog.topics.client import TopicClient
from raftlog.topics.client_stream import POLL_INTERVAL
from raftlog.topics.groups.sync_client import SyncGroupCalls
from raftlog.topics.records import LoggedRecord, PropertyValue, Record, RecordId
from raftlog.topics.sync_client_tx import SyncTransaction
from raftlog.topics.wire_tx import TransactionInfo


async def _next(stream: AsyncIterator[LoggedRecord]) -> LoggedRecord | None:
    try:
        return await stream.__anext__()
    except StopAsyncIteration:
        return None


async def _close(stream: AsyncIterator[LoggedRecord]) -> None:
    aclose = getattr(stream, "aclose", None)
    if aclose is not None:
        await aclose()


class SyncTopicClient(SyncGroupCalls):
    """Blocking topic operations (the group calls: ``SyncGroupCalls``). Give it ``peers``
    and ``ident`` (it then owns a :class:`SyncRaftClient` and closes it), or ``client=`` an
    existing one to share (left open)."""

    def __init__(
        self,
        peers: Sequence[str] | None = None,
        ident: str | bytes | None = None,
        *,
        client: SyncRaftClient | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        curve: CurveClient | None = None,
    ) -> None:
        if client is None:
            if peers is None or ident is None:
                raise ValueError("give peers and ident, or client=")
            client = SyncRaftClient(peers, ident, timeout=timeout, curve=curve)
            self._owns_client = True
        else:
            self._owns_client = False
        self._sync = client
        self._closed = False
        self._topics: TopicClient = client.run(self._create(client))

    @staticmethod
    async def _create(client: SyncRaftClient) -> TopicClient:
        return TopicClient(client.async_client)

    # -- lifecycle -------------------------------------------------------------------------
    def __enter__(self) -> SyncTopicClient:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        """Close the topic client (and the SyncRaftClient if it owns it); idempotent."""
        if self._closed:
            return
        self._closed = True
        try:
            if not self._sync.closed:
                self._sync.run(self._topics.aclose())
        finally:
            if self._owns_client:
                self._sync.close()

    @property
    def raft_client(self) -> SyncRaftClient:
        return self._sync

    def _run(self, coro: Any) -> Any:
        if self._closed:
            coro.close()
            raise ClientClosedError("the topic client is closed")
        return self._sync.run(coro)

    # -- publishing ------------------------------------------------------------------------
    def publish(
        self,
        topic: str,
        value: bytes,
        *,
        key: bytes | None = None,
        headers: Mapping[str, bytes] | None = None,
        timestamp_ms: int | None = None,
        ttl_ms: int | None = None,
        request_id: bytes | None = None,
        timeout: float | None = None,
    ) -> RecordId:
        """See :meth:`TopicClient.publish`."""
        result: RecordId = self._run(
            self._topics.publish(
                topic,
                value,
                key=key,
                headers=headers,
                timestamp_ms=timestamp_ms,
                ttl_ms=ttl_ms,
                request_id=request_id,
                timeout=timeout,
            )
        )
        return result

    def publish_batch(
        self,
        records: Sequence[Record],
        *,
        request_id: bytes | None = None,
        timeout: float | None = None,
    ) -> list[RecordId]:
        """See :meth:`TopicClient.publish_batch`."""
        result: list[RecordId] = self._run(
            self._topics.publish_batch(records, request_id=request_id, timeout=timeout)
        )
        return result

    # -- transactions (issue #18) ----------------------------------------------------------
    def begin_transaction(
        self,
        *,
        timeout: float | None = None,
        txid: str | None = None,
        exist_ok: bool = False,
        request_id: bytes | None = None,
        request_timeout: float | None = None,
    ) -> SyncTransaction:
        """See :meth:`TopicClient.begin_transaction`."""
        handle = self._run(
            self._topics.begin_transaction(
                timeout=timeout,
                txid=txid,
                exist_ok=exist_ok,
                request_id=request_id,
                request_timeout=request_timeout,
            )
        )
        return SyncTransaction(handle, self._run)

    def resume_transaction(self, txid: str) -> SyncTransaction:
        """See :meth:`TopicClient.resume_transaction`."""
        return SyncTransaction(self._topics.resume_transaction(txid), self._run)

    @contextlib.contextmanager
    def transaction(
        self, *, timeout: float | None = None, txid: str | None = None
    ) -> Iterator[SyncTransaction]:
        """``with topics.transaction(timeout=30) as tx: tx.publish(...)``: committed when the
        block ends normally, rolled back when it raises (the exception propagates)."""
        tx = self.begin_transaction(timeout=timeout, txid=txid)
        try:
            yield tx
        except BaseException as exc:
            try:
                tx.rollback()
            except Exception as failure:  # the block's error matters more: keep it on top
                exc.add_note(f"rollback of transaction {tx.id} failed too: {failure!r}")
            raise
        tx.commit()

    def transaction_status(
        self, txid: str, *, url: str | None = None, timeout: float | None = None
    ) -> TransactionInfo:
        """See :meth:`TopicClient.transaction_status`."""
        info: TransactionInfo = self._run(
            self._topics.transaction_status(txid, url=url, timeout=timeout)
        )
        return info

    # -- topics ----------------------------------------------------------------------------
    def create_topic(
        self,
        name: str,
        *,
        retention_ms: int | None = None,
        max_bytes: int | None = None,
        max_record_bytes: int | None = None,
        properties: Mapping[str, PropertyValue] | None = None,
        exist_ok: bool = False,
        timeout: float | None = None,
    ) -> int | None:
        """See :meth:`TopicClient.create_topic`."""
        result: int | None = self._run(
            self._topics.create_topic(
                name,
                retention_ms=retention_ms,
                max_bytes=max_bytes,
                max_record_bytes=max_record_bytes,
                properties=properties,
                exist_ok=exist_ok,
                timeout=timeout,
            )
        )
        return result

    def update_topic(
        self, name: str, changes: Mapping[str, PropertyValue], *, timeout: float | None = None
    ) -> int:
        """See :meth:`TopicClient.update_topic`."""
        result: int = self._run(self._topics.update_topic(name, changes, timeout=timeout))
        return result

    def delete_topic(self, name: str, *, timeout: float | None = None) -> int:
        """See :meth:`TopicClient.delete_topic`."""
        result: int = self._run(self._topics.delete_topic(name, timeout=timeout))
        return result

    def describe(
        self, topic: str, *, url: str | None = None, timeout: float | None = None
    ) -> rpc.TopicInfo:
        """See :meth:`TopicClient.describe`."""
        result: rpc.TopicInfo = self._run(self._topics.describe(topic, url=url, timeout=timeout))
        return result

    def list_topics(
        self, *, url: str | None = None, timeout: float | None = None
    ) -> tuple[str, ...]:
        """See :meth:`TopicClient.list_topics`."""
        result: tuple[str, ...] = self._run(self._topics.list_topics(url=url, timeout=timeout))
        return result

    # -- reading ---------------------------------------------------------------------------
    def read(
        self,
        topic: str,
        *,
        from_index: int | None = None,
        from_position: int | None = None,
        from_time_ms: int | None = None,
        inclusive: bool = True,
        limit: int = rpc.DEFAULT_READ_LIMIT,
        url: str | None = None,
        timeout: float | None = None,
    ) -> rpc.ReadResult:
        """See :meth:`TopicClient.read`."""
        result: rpc.ReadResult = self._run(
            self._topics.read(
                topic,
                from_index=from_index,
                from_position=from_position,
                from_time_ms=from_time_ms,
                inclusive=inclusive,
                limit=limit,
                url=url,
                timeout=timeout,
            )
        )
        return result

    def subscribe(
        self,
        topics: Sequence[str],
        *,
        from_index: int | None = None,
        from_time_ms: int | None = None,
        start: Literal["beginning", "end"] = "beginning",
        url: str | None = None,
        poll_interval: float = POLL_INTERVAL,
    ) -> Iterator[LoggedRecord]:
        """See :meth:`TopicClient.subscribe`; a blocking iterator that follows forever."""
        stream = self._run(
            self._open(
                topics=topics,
                from_index=from_index,
                from_time_ms=from_time_ms,
                start=start,
                url=url,
                poll_interval=poll_interval,
            )
        )
        return self._iterate(stream)

    async def _open(
        self,
        *,
        topics: Sequence[str],
        from_index: int | None,
        from_time_ms: int | None,
        start: Literal["beginning", "end"],
        url: str | None,
        poll_interval: float,
    ) -> AsyncIterator[LoggedRecord]:
        return self._topics.subscribe(
            topics,
            from_index=from_index,
            from_time_ms=from_time_ms,
            start=start,
            url=url,
            poll_interval=poll_interval,
        )

    def _iterate(self, stream: AsyncIterator[LoggedRecord]) -> Generator[LoggedRecord, None, None]:
        try:
            while (item := self._run(_next(stream))) is not None:
                yield item
        finally:
            if not self._closed:
                with contextlib.suppress(ClientClosedError, RuntimeError):
                    self._run(_close(stream))
