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
API's. The methods delegate to :class:`Transaction` (``raftlog.client.blocking``).
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from raftlog.client.blocking import BlockingFace, blocking
from raftlog.topics.client_tx import Transaction

T = TypeVar("T")

Runner = Callable[[Coroutine[Any, Any, Any]], Any]
"""Runs a coroutine on the client's loop and returns its result (``SyncTopicClient._run``)."""


class SyncTransaction(BlockingFace):
    """A blocking handle on one transaction (see :class:`Transaction` for the semantics)."""

    store = blocking(Transaction.store)
    publish = blocking(Transaction.publish)
    commit = blocking(Transaction.commit)
    rollback = blocking(Transaction.rollback)
    status = blocking(Transaction.status)

    def __init__(self, handle: Transaction, run: Runner) -> None:
        self._handle = handle
        self._runner = run

    @property
    def id(self) -> str:
        """The transaction id (give it to ``resume_transaction`` elsewhere)."""
        return self._handle.id

    @property
    def _delegate(self) -> Transaction:
        return self._handle

    def _run(self, coro: Coroutine[Any, Any, T]) -> T:
        result: T = self._runner(coro)
        return result

    def __repr__(self) -> str:
        return f"SyncTransaction({self.id!r})"
