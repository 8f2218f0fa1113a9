"""``SyncTransaction``: the blocking twin of :class:`raftlog.topics.client_tx.Transaction`.

Usage::

    with SyncTopicClient(urls, ident) as topics:
        with topics.transaction(timeout=30) as tx:        # commit on exit, rollback on error
            tx.publish("orders", b"a")
        tx = topics.begin_transaction(timeout=30)
        tx.store("orders", [b"b", b"c"])
        index = topics.resume_transaction(tx.id).commit()

Each call runs the async handle's method on the SyncRaftClient's loop thread (through the
owning ``SyncTopicClient``), so arguments, errors and exactly-once behaviour are the async
API's.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Mapping, Sequence
from typing import Any

from raftlog.topics.client_tx import Transaction
from raftlog.topics.records import Record
from raftlog.topics.wire_tx import TransactionInfo

Runner = Callable[[Coroutine[Any, Any, Any]], Any]
"""Runs a coroutine on the client's loop and returns its result (``SyncTopicClient._run``)."""


class SyncTransaction:
    """A blocking handle on one transaction (see :class:`Transaction` for the semantics)."""

    def __init__(self, handle: Transaction, run: Runner) -> None:
        self._handle = handle
        self._run = run

    @property
    def id(self) -> str:
        """The transaction id (give it to ``resume_transaction`` elsewhere)."""
        return self._handle.id

    def __repr__(self) -> str:
        return f"SyncTransaction({self.id!r})"

    def store(
        self,
        topic: str | None,
        records: Sequence[bytes | Record],
        *,
        request_id: bytes | None = None,
        timeout: float | None = None,
    ) -> int:
        """See :meth:`Transaction.store`."""
        index: int = self._run(
            self._handle.store(topic, records, request_id=request_id, timeout=timeout)
        )
        return index

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
    ) -> int:
        """See :meth:`Transaction.publish`."""
        index: int = self._run(
            self._handle.publish(
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
        return index

    def commit(self, *, request_id: bytes | None = None, timeout: float | None = None) -> int:
        """See :meth:`Transaction.commit`."""
        index: int = self._run(self._handle.commit(request_id=request_id, timeout=timeout))
        return index

    def rollback(self, *, request_id: bytes | None = None, timeout: float | None = None) -> None:
        """See :meth:`Transaction.rollback`."""
        self._run(self._handle.rollback(request_id=request_id, timeout=timeout))

    def status(self, *, url: str | None = None, timeout: float | None = None) -> TransactionInfo:
        """See :meth:`Transaction.status`."""
        info: TransactionInfo = self._run(self._handle.status(url=url, timeout=timeout))
        return info
