"""Transactions that span calls (issue #18): store records in any number of calls, then
commit (all visible at once, at the commit's log position) or roll back (none, ever).

Usage::

    async with topics.transaction(timeout=30) as tx:      # commit on exit,
        await tx.publish("orders", b"a", key=b"k1")        # rollback on an exception
        await tx.publish("audit", b"b")

    tx = await topics.begin_transaction(timeout=30)        # explicit, across calls
    await tx.store("orders", [b"a", b"b"])
    later = topics.resume_transaction(tx.id)               # another client, another call
    index = await later.commit()                           # ids: (index, 0 .. n-1)

Every call is one topic entry sent with ``TP`` (``raftlog.topics.wire_tx``) under its
own request id, retried with the same id across leader changes until a final answer: a
store is appended at most once (exactly-once with the commit). Give ``request_id=`` to make
a call idempotent across *your* retries too (e.g. an HTTP request retried by its sender).
Refusals are typed: ``UnknownTransactionError``, ``TransactionExpiredError``,
``TransactionAbortedError``, ``TransactionCommittedError``, ``TransactionExistsError``,
``TransactionLimitError`` (``raftlog.errors``), plus the ``TopicError`` of a record a plain
publish would refuse (unknown topic, record too large).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from typing import Protocol

from raftlog.errors import TransactionAbortedError, TransactionExpiredError
from raftlog.topics import wire_tx as tx_rpc
from raftlog.topics.record_builder import make_record
from raftlog.topics.records import Record
from raftlog.topics.records_tx import (
    DEFAULT_TX_TIMEOUT_MS,
    Actor,
    TxControl,
    check_tx_timeout,
    check_txid,
    encode_tx_control,
    encode_tx_store,
)


class TopicClient(Protocol):
    """What a handle needs of ``raftlog.topics.client.TopicClient`` (a Protocol, so the two
    modules do not import each other)."""

    async def propose(
        self, data: bytes, *, request_id: bytes | None = None, timeout: float | None = None
    ) -> int:
        """Send topic entry ``data`` with ``TP``; its log index once applied."""
        ...

    async def transaction_status(
        self, txid: str, *, url: str | None = None, timeout: float | None = None
    ) -> tx_rpc.TransactionInfo:
        """``TS`` for ``txid``."""
        ...

__all__ = ["Transaction", "new_txid", "timeout_ms_of"]


def new_txid() -> str:
    """A fresh transaction id: a random UUID (hex), so ids never collide by accident."""
    return uuid.uuid4().hex


def timeout_ms_of(timeout: float) -> int:
    """A transaction timeout in seconds as the whole milliseconds the log carries."""
    ms = round(timeout * 1000)
    check_tx_timeout(ms)
    return ms


class Transaction:
    """A handle on one transaction: from ``TopicClient.begin_transaction`` or, for one
    begun elsewhere, ``TopicClient.resume_transaction(txid)``. Holds only the id, so any
    number of handles (in any processes) may drive the same transaction -- on a CURVE
    cluster only handles of the principal that began it, or of an admin (issue #25).

    ``on_behalf_of`` is for a member acting for an authenticated client (a peer's REST
    gateway): its entries carry that actor instead of the member's own identity. A client
    key cannot use it: the peer's request guard replaces the actor of every client entry."""

    def __init__(self, topics: TopicClient, txid: str, on_behalf_of: Actor | None = None) -> None:
        self._topics = topics
        self._id = check_txid(txid)
        self._actor = on_behalf_of

    @property
    def id(self) -> str:
        """The transaction id (give it to ``resume_transaction`` elsewhere)."""
        return self._id

    @property
    def actor(self) -> Actor | None:
        """Whom this handle's entries name (``on_behalf_of``; None: the sender itself)."""
        return self._actor

    def __repr__(self) -> str:
        return f"Transaction({self._id!r})"

    async def store(
        self,
        topic: str | None,
        records: Sequence[bytes | Record],
        *,
        request_id: bytes | None = None,
        timeout: float | None = None,
    ) -> int:
        """Store ``records`` under the transaction (one entry: all or none of this call):
        ``bytes`` values go to ``topic``; ``Record`` items keep their own topic, so one call
        may span topics. Invisible until the commit. Returns the store entry's log index
        (not a message id: ids are given at commit)."""
        built: list[Record] = []
        for item in records:
            if isinstance(item, Record):
                built.append(item)
            else:
                if topic is None:
                    raise ValueError("bytes values need a topic")
                built.append(make_record(topic, item))
        data = encode_tx_store(self._id, built, self._actor)
        return await self._topics.propose(data, request_id=request_id, timeout=timeout)

    async def publish(
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
        """Store one record under the transaction (``TopicClient.publish``'s fields; the TTL
        counts from the commit). Returns the store entry's log index."""
        record = make_record(
            topic, value, key=key, headers=headers, timestamp_ms=timestamp_ms, ttl_ms=ttl_ms
        )
        return await self.store(None, [record], request_id=request_id, timeout=timeout)

    async def commit(
        self, *, request_id: bytes | None = None, timeout: float | None = None
    ) -> int:
        """Make every stored record visible at once; returns the commit's log index. The
        records' ids are ``(index, 0)``, ``(index, 1)``, ... in store order (across topics).
        Raises ``TransactionExpiredError`` / ``TransactionAbortedError`` /
        ``UnknownTransactionError`` when there is nothing to commit any more."""
        data = encode_tx_control(TxControl("commit", self._id, actor=self._actor))
        return await self._topics.propose(data, request_id=request_id, timeout=timeout)

    async def rollback(
        self, *, request_id: bytes | None = None, timeout: float | None = None
    ) -> None:
        """Discard the transaction: none of its records will ever be visible. Idempotent:
        a transaction already rolled back or timed out is fine (nothing to discard);
        ``TransactionCommittedError`` if it committed."""
        data = encode_tx_control(TxControl("rollback", self._id, actor=self._actor))
        try:
            await self._topics.propose(data, request_id=request_id, timeout=timeout)
        except (TransactionAbortedError, TransactionExpiredError):
            return

    async def status(
        self, *, url: str | None = None, timeout: float | None = None
    ) -> tx_rpc.TransactionInfo:
        """What peer ``url`` (default: the leader) knows of the transaction (``TS``)."""
        return await self._topics.transaction_status(self._id, url=url, timeout=timeout)


def begin_data(txid: str, timeout: float | None, actor: Actor | None = None) -> bytes:
    """The begin entry of ``txid`` with ``timeout`` seconds (None: the default, 60 s)."""
    ms = DEFAULT_TX_TIMEOUT_MS if timeout is None else timeout_ms_of(timeout)
    return encode_tx_control(TxControl("begin", txid, ms, actor=actor))
