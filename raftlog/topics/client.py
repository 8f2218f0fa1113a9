"""Topics on top of :class:`RaftClient` (issue #7): publish records, read, describe, list.

Usage::

    async with RaftClient(urls, ident) as client, TopicClient(client) as topics:
        await topics.create_topic("orders", retention_ms=86_400_000)
        rid = await topics.publish("orders", b"payload", key=b"customer-1")
        ids = await topics.publish_batch([Record("orders", b"a"), Record("audit", b"b")])
        result = await topics.read("orders", from_index=rid.index)

A publish is one STATE entry built by :func:`publish_data` (a batch is atomic: one entry,
all records or none). It is sent with the ``TP`` RPC (``raftlog.topics.wire``), which is
RequestUpdate plus a "refused" answer, so a publish to an unknown topic fails at once with
a ``TopicError`` instead of timing out. ``client.request_update(publish_data(...))`` also
works -- the data is the same -- but a refused update gets no answer there (§10.3).

The transport is the RaftClient's (:meth:`RaftClient.leader_request`,
:meth:`RaftClient.peer_request`): the same sockets, leader discovery, retries, deadlines and
fail-fast as the core RPCs. Publishes are retried with the same request id until a final
answer, so they are applied at most once.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Mapping, Sequence
from types import TracebackType
from typing import Literal

from raftlog.client.client import RaftClient
from raftlog.client.routing import WAIT, Done, Outcome, Redirect
from raftlog.entry import REQUEST_ID_SIZE
from raftlog.errors import RequestExpiredError, TopicError, TransactionExistsError
from raftlog.topics import wire as rpc
from raftlog.topics import wire_publish
from raftlog.topics import wire_tx as tx_rpc
from raftlog.topics.client_read_calls import ReadCalls
from raftlog.topics.client_stream import POLL_INTERVAL, subscribe
from raftlog.topics.client_tx import Transaction, begin_data, new_txid
from raftlog.topics.groups.client import GroupCalls
from raftlog.topics.kv import KeyValue
from raftlog.topics.record_builder import make_record
from raftlog.topics.records import (
    AdminOp,
    LoggedRecord,
    PropertyValue,
    Record,
    RecordId,
    TopicCommand,
    TopicProperties,
    encode_command,
    encode_records,
)
from raftlog.topics.records_kv import Expectation, Expected, encode_conditional, expectations
from raftlog.topics.records_tx import Actor

__all__ = ["TopicClient", "admin_data", "make_record", "publish_data"]


def publish_data(records: Sequence[Record]) -> bytes:
    """Entry data publishing ``records`` atomically (the leader stamps the append time)."""
    return encode_records(records)


def admin_data(
    op: AdminOp, topic: str, properties: Mapping[str, PropertyValue] | None = None
) -> bytes:
    """Entry data of a topic admin command (``create`` / ``update`` / ``delete``)."""
    return encode_command(TopicCommand(op, topic, dict(properties or {})))


class TopicClient(ReadCalls, GroupCalls):
    """Topic operations over a :class:`RaftClient` (which it does not close); the reads come
    from ``ReadCalls`` (``raftlog.topics.client_read_calls``), the consumer group calls from
    ``GroupCalls`` (``raftlog.topics.groups.client``).

    Every request travels on the RaftClient's transport: publishes with
    :meth:`RaftClient.leader_request` (leader discovery, "not leader" redirects, resends
    with the same request id, fail-fast when the cluster refuses connections), reads with
    :meth:`RaftClient.peer_request` to a given peer or ``leader_request`` to the leader.
    """

    def __init__(self, client: RaftClient) -> None:
        self._client = client

    async def __aenter__(self) -> TopicClient:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Nothing of its own to close: the sockets belong to the RaftClient."""

    # -- the primitive ---------------------------------------------------------------------
    async def request(
        self,
        url: str | None,
        msg_type: bytes,
        args: Sequence[bytes],
        *,
        timeout: float | None = None,
        patience: float = 0.0,
    ) -> list[bytes]:
        """Send ``[id, msg_type, ident, *args]`` to the peer at ``url`` (None: the leader)
        and return the frames after the id of the first answer. Silence longer than
        ``response_timeout`` (+ ``patience``, with a ``url``: a request the peer may hold)
        resends the same frames (so use it for idempotent requests only);
        ``ClusterUnavailableError`` after ``timeout`` (default: the client's)."""
        if url is not None:
            return await self._client.peer_request(
                url, msg_type, args, timeout=timeout, patience=patience
            )

        def any_answer(frames: list[bytes], _url: str) -> Outcome[list[bytes]]:
            return Done(frames)

        return await self._client.leader_request(msg_type, args, any_answer, timeout=timeout)

    async def propose(
        self, data: bytes, *, request_id: bytes | None = None, timeout: float | None = None
    ) -> int:
        """Publish topic entry ``data`` with ``TP``; its log index once applied. Retries go
        to the current leader with the same request id. Raises ``TopicError`` if the leader
        refuses it (nothing was appended), ``RequestExpiredError``, or
        ``ClusterUnavailableError`` after ``timeout``."""
        rid = self._client.new_request_id() if request_id is None else bytes(request_id)
        if len(rid) != REQUEST_ID_SIZE:
            raise ValueError(f"request_id must be {REQUEST_ID_SIZE} bytes")
        self._client.check_entry_size(data)

        def interpret(frames: list[bytes], _url: str) -> Outcome[int]:
            reply = wire_publish.decode_publish_reply(frames)
            if reply.status == "done" and reply.index is not None:
                return Done(reply.index)
            if reply.status == "accepted":
                return WAIT
            if reply.status == "not_leader":
                return Redirect(reply.leader_id)
            if reply.status == "rejected" and reply.error is not None:
                raise reply.error
            raise RequestExpiredError(f"request id {rid.hex()} expired")

        index = await self._client.leader_request(
            rpc.TYPE_PUBLISH, [data], interpret, request_id=rid, final_from_any=True,
            timeout=timeout,
        )
        return self._client.note_written(index)  # read_your_writes reads wait for it

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
        expect_last_id: Expected = None,
        expect_key_last_id: Expected = None,
    ) -> RecordId:
        """Publish one record; its id once applied (see ``make_record`` for the fields).
        Conditional publish (issue #29): ``expect_last_id`` -- the topic's last record must
        be this id (``NO_RECORD``: the topic must be empty); ``expect_key_last_id`` -- the
        latest record of ``key`` must be this id (``NO_RECORD``: the key has none alive;
        compacted topics). Otherwise nothing is appended and ``ExpectationFailedError``
        names the current last id."""
        record = make_record(
            topic, value, key=key, headers=headers, timestamp_ms=timestamp_ms, ttl_ms=ttl_ms
        )
        expect = expectations(topic, key, expect_last_id, expect_key_last_id)
        data = encode_conditional([record], expect)
        index = await self.propose(data, request_id=request_id, timeout=timeout)
        return RecordId(index, 0)

    async def publish_batch(
        self,
        records: Sequence[Record],
        *,
        request_id: bytes | None = None,
        timeout: float | None = None,
        expect: Sequence[Expectation] = (),
    ) -> list[RecordId]:
        """Publish ``records`` atomically (one entry); their ids in order. ``expect``: the
        batch applies only if every expectation holds (``raftlog.topics.records_kv``),
        else ``ExpectationFailedError`` and nothing is appended."""
        data = encode_conditional(records, expect)
        index = await self.propose(data, request_id=request_id, timeout=timeout)
        return [RecordId(index, position) for position in range(len(records))]

    async def create_topic(
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
        """Create a topic; the index of the create command. With ``exist_ok`` an existing
        topic is not an error (None is returned; its properties are left as they are).
        ``properties`` sets any topic property by name (``TopicProperties``), the keywords
        the common limits."""
        limits = TopicProperties(retention_ms, max_bytes, max_record_bytes)
        props = limits.updated(properties or {}).as_dict()
        try:
            return await self.propose(admin_data("create", name, props), timeout=timeout)
        except TopicError as exc:
            if exist_ok and exc.name == "TopicExists":
                return None
            raise

    async def update_topic(
        self, name: str, changes: Mapping[str, PropertyValue], *, timeout: float | None = None
    ) -> int:
        """Change the given properties only (None removes a limit)."""
        return await self.propose(admin_data("update", name, changes), timeout=timeout)

    async def delete_topic(self, name: str, *, timeout: float | None = None) -> int:
        return await self.propose(admin_data("delete", name), timeout=timeout)

    # -- transactions (issue #18; raftlog.topics.client_tx) ------------------------------
    async def begin_transaction(
        self,
        *,
        timeout: float | None = None,
        txid: str | None = None,
        exist_ok: bool = False,
        request_id: bytes | None = None,
        request_timeout: float | None = None,
        on_behalf_of: Actor | None = None,
    ) -> Transaction:
        """Begin a transaction that times out ``timeout`` seconds (default 60, at most 900)
        after its begin entry, by the log clock; ``txid`` defaults to a random id. With
        ``exist_ok`` an open transaction of that id is not an error (its handle is returned:
        for callers that begin on their first store, like a REST store). ``request_timeout``
        bounds this call (``ClusterUnavailableError``); ``on_behalf_of``: see
        ``Transaction``."""
        txid = new_txid() if txid is None else txid
        data = begin_data(txid, timeout, on_behalf_of)
        try:
            await self.propose(data, request_id=request_id, timeout=request_timeout)
        except TransactionExistsError:
            if not exist_ok:
                raise
        return Transaction(self, txid, on_behalf_of)

    def resume_transaction(self, txid: str, on_behalf_of: Actor | None = None) -> Transaction:
        """A handle on transaction ``txid`` begun by another call (no round trip: an unknown
        or finished transaction, or one of another principal, is reported by the first store
        or commit); ``on_behalf_of``: see ``Transaction``."""
        return Transaction(self, txid, on_behalf_of)

    @contextlib.asynccontextmanager
    async def transaction(
        self, *, timeout: float | None = None, txid: str | None = None
    ) -> AsyncIterator[Transaction]:
        """``async with topics.transaction(timeout=30) as tx: await tx.publish(...)``: begun
        on entry, committed when the block ends normally, rolled back when it raises (the
        block's exception propagates; a failed rollback is chained, never hides it)."""
        tx = await self.begin_transaction(timeout=timeout, txid=txid)
        try:
            yield tx
        except BaseException as exc:
            try:
                await tx.rollback()
            except Exception as failure:  # the block's error matters more: keep it on top
                exc.add_note(f"rollback of transaction {tx.id} failed too: {failure!r}")
            raise
        await tx.commit()

    async def transaction_status(
        self, txid: str, *, url: str | None = None, timeout: float | None = None
    ) -> tx_rpc.TransactionInfo:
        """What peer ``url`` (default: the leader) knows of transaction ``txid`` (``TS``);
        ``UnknownTransactionError`` if nothing."""
        frames = await self.request(
            url, tx_rpc.TYPE_TX_STATUS, tx_rpc.encode_status_request(txid), timeout=timeout
        )
        return tx_rpc.decode_status_response(frames)

    # -- reading (any peer) ----------------------------------------------------------------
    @property
    def leader_url(self) -> str | None:
        """The leader's URL as last learned (None while unknown)."""
        leader = self._client.leader
        return None if leader is None else leader.url

    def subscribe(
        self,
        topics: Sequence[str],
        *,
        from_index: int | None = None,
        from_time_ms: int | None = None,
        start: Literal["beginning", "end"] = "beginning",
        url: str | None = None,
        poll_interval: float = POLL_INTERVAL,
        pattern: str | None = None,
        min_records: int = 1,
        min_bytes: int | None = None,
        max_bytes: int | None = None,
    ) -> AsyncIterator[LoggedRecord]:
        """Records of ``topics`` (and of the topics matching glob ``pattern``, later ones
        too) from an index (inclusive), a time or the end; catch up, then live -- the same
        records ``read`` gives, through ``TF`` push fetches (``min_records``/``min_bytes``
        an idle follower waits for, ``max_bytes`` the credit per answer; see
        :func:`raftlog.topics.client_stream.subscribe`)."""
        return subscribe(
            self,
            topics,
            from_index=from_index,
            from_time_ms=from_time_ms,
            start=start,
            url=url,
            poll_interval=poll_interval,
            pattern=pattern,
            min_records=min_records,
            min_bytes=min_bytes,
            max_bytes=max_bytes,
        )

    @property
    def kv(self) -> KeyValue:
        """The key-value view of compacted topics (``raftlog.topics.kv``)."""
        return KeyValue(self)

    @property
    def raft_client(self) -> RaftClient:
        """The client this topic client publishes and subscribes through."""
        return self._client
