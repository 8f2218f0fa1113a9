"""``SyncTopicClient``: the blocking twin of :class:`TopicClient`, for scripts and Spark tasks.

It runs on a :class:`SyncRaftClient`'s loop thread (``SyncRaftClient.run``) rather than
starting its own, so the same thread-safety rules hold: every call blocks until done and
works from plain scripts, from threads and from inside someone else's event loop. Methods,
arguments and errors are :class:`TopicClient`'s; ``subscribe`` returns a plain iterator
(leaving it early stops the follower). The methods delegate to :class:`TopicClient`
(``raftlog.client.blocking``: its signatures, docstrings and errors); this class adds the
lifecycle and the blocking ``transaction`` context manager.

Usage::

    with SyncTopicClient(urls, ident) as topics:
        topics.create_topic("orders", retention_ms=86_400_000, exist_ok=True)
        rid = topics.publish("orders", b"payload")
        for item in topics.subscribe(["orders"], from_index=rid.index):
            ...
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Coroutine, Iterator, Sequence
from typing import Any, TypeVar

from raftlog.client.blocking import ClosingFace, blocking, blocking_iter, blocking_wrapped
from raftlog.client.models import DEFAULT_TIMEOUT
from raftlog.client.sync import SyncRaftClient
from raftlog.errors import ClientClosedError
from raftlog.security.settings import CurveClient
from raftlog.topics.client import TopicClient
from raftlog.topics.client_tx import Transaction
from raftlog.topics.kv import SyncKeyValue
from raftlog.topics.records_tx import Actor
from raftlog.topics.sync_client_tx import SyncTransaction

T = TypeVar("T")


def _sync_transaction(face: SyncTopicClient, handle: Transaction) -> SyncTransaction:
    return SyncTransaction(handle, face._run)


class SyncTopicClient(ClosingFace):
    """Blocking topic operations. Give it ``peers`` and ``ident`` (it then owns a
    :class:`SyncRaftClient` and closes it), or ``client=`` an existing one to share (left
    open)."""

    request = blocking(TopicClient.request)
    propose = blocking(TopicClient.propose)
    publish = blocking(TopicClient.publish)
    publish_batch = blocking(TopicClient.publish_batch)
    create_topic = blocking(TopicClient.create_topic)
    update_topic = blocking(TopicClient.update_topic)
    delete_topic = blocking(TopicClient.delete_topic)
    begin_transaction = blocking_wrapped(TopicClient.begin_transaction, _sync_transaction)
    transaction_status = blocking(TopicClient.transaction_status)
    read = blocking(TopicClient.read)
    subscribe = blocking_iter(TopicClient.subscribe)
    describe = blocking(TopicClient.describe)
    list_topics = blocking(TopicClient.list_topics)
    record_counts = blocking(TopicClient.record_counts)
    fetch = blocking(TopicClient.fetch)
    records_arrive = blocking(TopicClient.records_arrive)
    # consumer groups (issue #27; ``raftlog.topics.groups.client.GroupCalls``)
    create_group = blocking(TopicClient.create_group)
    commit_group_position = blocking(TopicClient.commit_group_position)
    group_positions = blocking(TopicClient.group_positions)
    describe_group = blocking(TopicClient.describe_group)
    claim_topic = blocking(TopicClient.claim_topic)
    delete_group = blocking(TopicClient.delete_group)
    list_groups = blocking(TopicClient.list_groups)
    reset_group = blocking(TopicClient.reset_group)
    lease = blocking(TopicClient.lease)
    lease_more = blocking(TopicClient.lease_more)
    leased = blocking(TopicClient.leased)
    ack = blocking(TopicClient.ack)
    nack = blocking(TopicClient.nack)

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
        """The blocking raft client this one runs on (its loop thread is shared)."""
        return self._sync

    @property
    def async_topics(self) -> TopicClient:
        """The async client this one runs (for faces built on it, like ``SyncKeyValue``)."""
        return self._topics

    @property
    def kv(self) -> SyncKeyValue:
        """The key-value view of compacted topics (``raftlog.topics.kv``; issue #29)."""
        return SyncKeyValue(self)

    def run_coroutine(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run a coroutine of ``async_topics`` on this client's loop; its result."""
        return self._run(coro)

    def _run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` on the shared loop thread (refused once this client is closed)."""
        if self._closed:
            coro.close()
            raise ClientClosedError("the topic client is closed")
        return self._sync.run(coro)

    def _iterate(self, stream: AsyncIterator[T], batch: int) -> Iterator[T]:
        return self._sync.runner.iterate(stream, batch=batch, run=self._run, alive=self._alive)

    def _alive(self) -> bool:
        return not self._closed

    @property
    def _delegate(self) -> TopicClient:
        return self._topics

    # -- transactions (issue #18) ----------------------------------------------------------
    def resume_transaction(self, txid: str, on_behalf_of: Actor | None = None) -> SyncTransaction:
        """See :meth:`TopicClient.resume_transaction`."""
        return SyncTransaction(self._topics.resume_transaction(txid, on_behalf_of), self._run)

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
