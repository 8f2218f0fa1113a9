"""Topics on top of :class:`RaftClient` (issue #7): publish records, read, describe, list.

Usage::

    async with RaftClient(urls, ident) as client, TopicClient(client) as topics:
        await topics.create_topic("orders", retention_ms=86_400_000)
        rid = await topics.publish("orders", b"payload", key=b"customer-1")
        ids = await topics.publish_batch([Record("orders", b"a"), Record("audit", b"b")])
        result = await topics.read("orders", from_index=rid.index)

A publish is one STATE entry built by :func:`publish_data` (a batch is atomic: one entry,
all records or none). It is sent with the ``TP`` RPC (``raftlog.rpc.topics``), which is
RequestUpdate plus a "refused" answer, so a publish to an unknown topic fails at once with
a ``TopicError`` instead of timing out. ``client.request_update(publish_data(...))`` also
works -- the data is the same -- but a refused update gets no answer there (§10.3).

RaftClient has no "send a custom request" primitive, so this module has a minimal one
(:meth:`TopicClient.request`): one DEALER per peer URL on the client's ZeroMQ context, a
reader task per socket matching answers to requests by id. Leader discovery is delegated
to the RaftClient (``leader`` / ``request_config`` / ``invalidate_leader``). Publishes are
retried with the same request id until a final answer, so they are applied at most once.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncGenerator, AsyncIterator, Mapping, Sequence
from types import TracebackType
from typing import Final, Literal

import zmq
import zmq.asyncio

from raftlog import sockets
from raftlog.client.client import RaftClient
from raftlog.client.topic_stream import subscribe
from raftlog.entry import REQUEST_ID_SIZE
from raftlog.errors import ClientClosedError, ClusterUnavailableError, RequestExpiredError
from raftlog.records import (
    AdminOp,
    LoggedRecord,
    Record,
    RecordId,
    TopicCommand,
    TopicProperties,
    encode_command,
    encode_records,
)
from raftlog.rpc import topics as rpc
from raftlog.rpc.frames import encode_uint

ELECTION_PAUSE: Final = 0.1
MAX_ID: Final = (1 << 32) - 1

__all__ = ["TopicClient", "admin_data", "make_record", "publish_data"]


def make_record(
    topic: str,
    value: bytes,
    *,
    key: bytes | None = None,
    headers: Mapping[str, bytes] | None = None,
    timestamp_ms: int | None = None,
) -> Record:
    """A record with the producer timestamp defaulting to now."""
    stamp = int(time.time() * 1000) if timestamp_ms is None else timestamp_ms
    return Record(topic, bytes(value), key, dict(headers or {}), stamp)


def publish_data(records: Sequence[Record]) -> bytes:
    """Entry data publishing ``records`` atomically (the leader stamps the append time)."""
    return encode_records(records)


def admin_data(
    op: AdminOp, topic: str, properties: Mapping[str, int | None] | None = None
) -> bytes:
    """Entry data of a topic admin command (``create`` / ``update`` / ``delete``)."""
    return encode_command(TopicCommand(op, topic, dict(properties or {})))


class _Channel:
    """One DEALER to one peer and the requests waiting for its answers."""

    def __init__(self, context: zmq.asyncio.Context, url: str) -> None:
        self.socket = sockets.client_dealer(context, url, immediate=False)
        self.waiting: dict[bytes, asyncio.Queue[list[bytes]]] = {}
        self.reader = asyncio.get_running_loop().create_task(self._read())

    async def _read(self) -> None:
        while True:
            frames = await self.socket.recv_multipart()
            queue = self.waiting.get(frames[0]) if frames else None
            if queue is not None:  # late or foreign answers are dropped, as the protocol says
                queue.put_nowait(list(frames[1:]))

    async def aclose(self) -> None:
        self.reader.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self.reader
        self.socket.close(linger=0)


class TopicClient:
    """Topic operations over a :class:`RaftClient` (which it does not close)."""

    def __init__(self, client: RaftClient) -> None:
        self._client = client
        self._channels: dict[str, _Channel] = {}
        self._counter = 0

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
        channels, self._channels = self._channels, {}
        for channel in channels.values():
            await channel.aclose()

    # -- the primitive ---------------------------------------------------------------------
    def _channel(self, url: str) -> _Channel:
        self._client_open()
        channel = self._channels.get(url)
        if channel is None:
            channel = self._channels[url] = _Channel(self._client.context, url)
        return channel

    def _new_id(self) -> bytes:
        self._counter = self._counter % MAX_ID + 1
        return encode_uint(self._counter)

    async def request(
        self,
        url: str,
        msg_type: bytes,
        args: Sequence[bytes],
        *,
        timeout: float | None = None,
    ) -> list[bytes]:
        """Send ``[id, msg_type, ident, *args]`` to ``url`` and return the frames after the
        id of the first answer. Silence longer than ``response_timeout`` resends the same
        frames (so use it for idempotent requests only); ``ClusterUnavailableError`` after
        ``timeout`` (default: the client's)."""
        deadline = self._deadline(timeout)
        async with contextlib.aclosing(
            self._exchange(url, msg_type, args, deadline, self._new_id(), resend=True)
        ) as answers:
            async for frames in answers:
                return frames
        raise ClusterUnavailableError(f"{url} did not answer")  # unreachable with resend

    def _deadline(self, timeout: float | None) -> float:
        self._client_open()
        loop = asyncio.get_running_loop()
        return loop.time() + (self._client.timeout if timeout is None else timeout)

    def _client_open(self) -> None:
        if self._client.closed:
            raise ClientClosedError("the raftlog client is closed")

    async def _exchange(
        self,
        url: str,
        msg_type: bytes,
        args: Sequence[bytes],
        deadline: float,
        msg_id: bytes,
        *,
        resend: bool,
    ) -> AsyncGenerator[list[bytes], None]:
        """Every answer to one request until the caller stops iterating; on silence the
        frames are resent (``resend``) or the iteration ends (the caller moves on)."""
        loop = asyncio.get_running_loop()
        channel = self._channel(url)
        if msg_id in channel.waiting:
            raise ValueError(f"a request with id {msg_id.hex()} is already waiting on {url}")
        queue: asyncio.Queue[list[bytes]] = asyncio.Queue()
        channel.waiting[msg_id] = queue
        frames = [msg_id, msg_type, self._client.ident, *args]
        try:
            while True:
                await channel.socket.send_multipart(frames)
                while True:
                    wait = min(self._client.response_timeout, deadline - loop.time())
                    if wait <= 0:
                        raise ClusterUnavailableError(
                            f"no final answer from {url} to {msg_type.decode(errors='replace')}"
                        )
                    try:
                        answer = await asyncio.wait_for(queue.get(), wait)
                    except TimeoutError:
                        if not resend:
                            return
                        break
                    yield answer
        finally:
            channel.waiting.pop(msg_id, None)

    # -- publishing (leader) ---------------------------------------------------------------
    async def _leader_url(self, deadline: float) -> str:
        loop = asyncio.get_running_loop()
        while True:
            leader = self._client.leader
            if leader is not None:
                return leader.url
            remaining = deadline - loop.time()
            if remaining <= 0:
                raise ClusterUnavailableError("no leader found")
            info = await self._client.request_config(timeout=remaining)
            if info.leader_url is not None:
                return info.leader_url
            await asyncio.sleep(ELECTION_PAUSE)

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
        deadline = self._deadline(timeout)
        while True:
            url = await self._leader_url(deadline)
            async with contextlib.aclosing(
                self._exchange(url, rpc.TYPE_PUBLISH, [data], deadline, rid, resend=False)
            ) as answers:
                async for frames in answers:
                    reply = rpc.decode_publish_reply(frames)
                    if reply.status == "done" and reply.index is not None:
                        return reply.index
                    if reply.status == "rejected" and reply.error is not None:
                        raise reply.error
                    if reply.status == "expired":
                        raise RequestExpiredError(f"request id {rid.hex()} expired")
                    if reply.status == "not_leader":
                        break
            # "not leader" or silence: find the leader again, same request id
            self._client.invalidate_leader()
            await asyncio.sleep(ELECTION_PAUSE)

    async def publish(
        self,
        topic: str,
        value: bytes,
        *,
        key: bytes | None = None,
        headers: Mapping[str, bytes] | None = None,
        timestamp_ms: int | None = None,
        request_id: bytes | None = None,
        timeout: float | None = None,
    ) -> RecordId:
        record = make_record(topic, value, key=key, headers=headers, timestamp_ms=timestamp_ms)
        index = await self.propose(publish_data([record]), request_id=request_id, timeout=timeout)
        return RecordId(index, 0)

    async def publish_batch(
        self,
        records: Sequence[Record],
        *,
        request_id: bytes | None = None,
        timeout: float | None = None,
    ) -> list[RecordId]:
        """Publish ``records`` atomically (one entry); their ids in order."""
        index = await self.propose(publish_data(records), request_id=request_id, timeout=timeout)
        return [RecordId(index, position) for position in range(len(records))]

    async def create_topic(
        self,
        name: str,
        *,
        retention_ms: int | None = None,
        max_bytes: int | None = None,
        timeout: float | None = None,
    ) -> int:
        props = TopicProperties(retention_ms, max_bytes).as_dict()
        return await self.propose(admin_data("create", name, props), timeout=timeout)

    async def update_topic(
        self, name: str, changes: Mapping[str, int | None], *, timeout: float | None = None
    ) -> int:
        """Change the given properties only (None removes a limit)."""
        return await self.propose(admin_data("update", name, changes), timeout=timeout)

    async def delete_topic(self, name: str, *, timeout: float | None = None) -> int:
        return await self.propose(admin_data("delete", name), timeout=timeout)

    # -- reading (any peer) ----------------------------------------------------------------
    async def _url(self, url: str | None, timeout: float | None) -> str:
        return url if url is not None else await self._leader_url(self._deadline(timeout))

    async def read(
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
        """Records of ``topic`` from a record id or an append time (see ``raftlog.rpc.topics``
        ``TR``), from peer ``url`` or, by default, the leader."""
        req = rpc.ReadRequest(topic, from_index, from_position, from_time_ms, inclusive, limit)
        target = await self._url(url, timeout)
        frames = await self.request(
            target, rpc.TYPE_READ, rpc.encode_read_request(req), timeout=timeout
        )
        return rpc.decode_read_response(frames)

    def subscribe(
        self,
        topics: Sequence[str],
        *,
        from_index: int | None = None,
        from_time_ms: int | None = None,
        start: Literal["beginning", "end"] = "beginning",
    ) -> AsyncIterator[LoggedRecord]:
        """Records of ``topics`` from an index, a time or the end; catch up, then live
        (see :func:`raftlog.client.topic_stream.subscribe`)."""
        return subscribe(
            self, topics, from_index=from_index, from_time_ms=from_time_ms, start=start
        )

    @property
    def raft_client(self) -> RaftClient:
        """The client this topic client publishes and subscribes through."""
        return self._client

    async def describe(
        self, topic: str, *, url: str | None = None, timeout: float | None = None
    ) -> rpc.TopicInfo:
        target = await self._url(url, timeout)
        frames = await self.request(target, rpc.TYPE_DESCRIBE, [topic.encode()], timeout=timeout)
        return rpc.decode_describe_response(frames)

    async def list_topics(
        self, *, url: str | None = None, timeout: float | None = None
    ) -> tuple[str, ...]:
        target = await self._url(url, timeout)
        return rpc.decode_list_response(
            await self.request(target, rpc.TYPE_LIST, [], timeout=timeout)
        )
