"""The key-value view of compacted topics (issue #29): ``KeyValue`` (async) and
``SyncKeyValue`` (blocking), thin faces over the topic client.

A compacted topic (``cleanup_policy`` ``compact``) is a replicated map: a put is a keyed
record, a delete a tombstone, both ordinary publishes (``TP``), so they are durable,
ordered and conditional like any publish; a key's *revision* is the id of its latest record
(its log index and position), etcd's ``mod_revision``. ``get`` and ``keys`` ask one peer's
applied state (``KG``/``KK``, ``raftlog.topics.wire_kv``; the leader by default), and
``watch`` follows the topic from a revision with ``TR`` reads, keeping the keys with a
prefix.

What a watch from an old revision sees: the topic's *live* records from that revision on --
every key's latest value (or remembered tombstone) whose revision is at or after it, in
revision order, then every change as it applies. Intermediate values a key had before its
latest are not replayed (compaction removed them; etcd would answer "compacted"), and a
watcher that falls behind may likewise see only the latest of quick successive changes of
one key: what a compacted Kafka topic gives a consumer.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator, Coroutine, Generator, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from raftlog.topics import wire_kv as kv_rpc
from raftlog.topics.records import LoggedRecord, Record, RecordId
from raftlog.topics.records_kv import Expected, encode_conditional, expectations
from raftlog.topics.transport import TopicTransport


class TopicRequests(TopicTransport, Protocol):
    """What the view uses of ``TopicClient`` (a Protocol: the client module imports this
    one to offer ``TopicClient.kv``): its primitives, and following topics."""

    def subscribe(
        self,
        topics: Sequence[str],
        *,
        from_index: int | None = None,
        from_time_ms: int | None = None,
        start: Literal["beginning", "end"] = "beginning",
        url: str | None = None,
        poll_interval: float = ...,
    ) -> AsyncIterator[LoggedRecord]:
        """Follow topics from an index, a time or the end."""
        ...


class SyncRunner(Protocol):
    """What the blocking face uses of ``SyncTopicClient``."""

    @property
    def async_topics(self) -> TopicRequests:
        """The async topic client it runs."""
        ...

    def run_coroutine(self, coro: Coroutine[Any, Any, Any]) -> Any:
        """Run ``coro`` on the client's loop; its result."""
        ...


@dataclass(frozen=True, slots=True)
class KeyValueEvent:
    """One change a watch reports: a ``put`` (``value`` set) or a ``delete``."""

    kind: Literal["put", "delete"]
    key: bytes
    value: bytes
    revision: RecordId
    """The id of the record that made the change."""
    append_time_ms: int


def event_of(item: LoggedRecord) -> KeyValueEvent:
    """The change a compacted topic's record stands for."""
    record = item.record
    kind: Literal["put", "delete"] = "delete" if record.tombstone else "put"
    return KeyValueEvent(kind, record.key or b"", record.value, item.id, item.append_time_ms)


class KeyValue:
    """Get, list, put, delete and watch the keys of compacted topics (module docstring)."""

    def __init__(self, topics: TopicRequests) -> None:
        self._topics = topics

    async def put(
        self,
        topic: str,
        key: bytes,
        value: bytes,
        *,
        expect_revision: Expected = None,
        timeout: float | None = None,
    ) -> RecordId:
        """Set ``key`` to ``value``; the new revision. ``expect_revision``: only if the key's
        current revision is this (``NO_RECORD``: only if absent), else
        ``ExpectationFailedError`` naming the current one."""
        return await self._publish(Record(topic, value, key), expect_revision, timeout)

    async def delete(
        self,
        topic: str,
        key: bytes,
        *,
        expect_revision: Expected = None,
        timeout: float | None = None,
    ) -> RecordId:
        """Delete ``key`` (a tombstone: watchers see the deletion); the revision of the
        deletion. A key that has no value is not an error (the tombstone is written)."""
        tombstone = Record(topic, b"", key, tombstone=True)
        return await self._publish(tombstone, expect_revision, timeout)

    async def _publish(self, record: Record, expect: Expected, timeout: float | None) -> RecordId:
        conditions = expectations(record.topic, record.key, None, expect)
        data = encode_conditional([record], conditions)
        return RecordId(await self._topics.propose(data, timeout=timeout), 0)

    async def get(
        self, topic: str, key: bytes, *, url: str | None = None, timeout: float | None = None
    ) -> LoggedRecord | None:
        """The live record of ``key`` (None: absent or deleted) as peer ``url`` (default:
        the leader) has applied it."""
        frames = await self._topics.request(
            url, kv_rpc.TYPE_KV_GET, kv_rpc.encode_get_request(topic, key), timeout=timeout
        )
        return kv_rpc.decode_get_response(frames).record

    async def keys(
        self,
        topic: str,
        prefix: bytes = b"",
        *,
        url: str | None = None,
        limit: int | None = None,
        timeout: float | None = None,
    ) -> list[tuple[bytes, RecordId]]:
        """Every live key starting with ``prefix`` and its revision, in byte order (paged
        through ``KK``; ``limit``: at most that many)."""
        out: list[tuple[bytes, RecordId]] = []
        after: bytes | None = None
        while limit is None or len(out) < limit:
            page = (
                kv_rpc.DEFAULT_KEYS_LIMIT
                if limit is None
                else min(kv_rpc.MAX_KEYS_LIMIT, limit - len(out))
            )
            req = kv_rpc.KeysRequest(topic, prefix, after, page)
            frames = await self._topics.request(
                url, kv_rpc.TYPE_KV_KEYS, kv_rpc.encode_keys_request(req), timeout=timeout
            )
            result = kv_rpc.decode_keys_response(frames)
            out.extend(result.keys)
            if not result.more or not result.keys:
                break
            after = result.keys[-1][0]
        return out

    async def watch(
        self,
        topic: str,
        prefix: bytes = b"",
        from_revision: int | None = None,
        *,
        url: str | None = None,
    ) -> AsyncGenerator[KeyValueEvent, None]:
        """Changes of the keys with ``prefix``, from log index ``from_revision`` on
        (inclusive; None: only changes from now on), following forever (module docstring
        for what an old revision gives)."""
        start: Literal["beginning", "end"] = "end" if from_revision is None else "beginning"
        stream = self._topics.subscribe([topic], from_index=from_revision, start=start, url=url)
        try:
            async for item in stream:
                if (item.record.key or b"").startswith(prefix):
                    yield event_of(item)
        finally:
            aclose = getattr(stream, "aclose", None)
            if aclose is not None:
                await aclose()


class SyncKeyValue:
    """The blocking face of :class:`KeyValue` over a ``SyncTopicClient``."""

    def __init__(self, topics: SyncRunner) -> None:
        self._sync = topics
        self._kv = KeyValue(topics.async_topics)

    def put(
        self,
        topic: str,
        key: bytes,
        value: bytes,
        *,
        expect_revision: Expected = None,
        timeout: float | None = None,
    ) -> RecordId:
        """See :meth:`KeyValue.put`."""
        result: RecordId = self._sync.run_coroutine(
            self._kv.put(topic, key, value, expect_revision=expect_revision, timeout=timeout)
        )
        return result

    def delete(
        self,
        topic: str,
        key: bytes,
        *,
        expect_revision: Expected = None,
        timeout: float | None = None,
    ) -> RecordId:
        """See :meth:`KeyValue.delete`."""
        result: RecordId = self._sync.run_coroutine(
            self._kv.delete(topic, key, expect_revision=expect_revision, timeout=timeout)
        )
        return result

    def get(
        self, topic: str, key: bytes, *, url: str | None = None, timeout: float | None = None
    ) -> LoggedRecord | None:
        """See :meth:`KeyValue.get`."""
        result: LoggedRecord | None = self._sync.run_coroutine(
            self._kv.get(topic, key, url=url, timeout=timeout)
        )
        return result

    def keys(
        self, topic: str, prefix: bytes = b"", *, url: str | None = None, limit: int | None = None
    ) -> list[tuple[bytes, RecordId]]:
        """See :meth:`KeyValue.keys`."""
        result: list[tuple[bytes, RecordId]] = self._sync.run_coroutine(
            self._kv.keys(topic, prefix, url=url, limit=limit)
        )
        return result

    def watch(
        self,
        topic: str,
        prefix: bytes = b"",
        from_revision: int | None = None,
        *,
        url: str | None = None,
    ) -> Generator[KeyValueEvent, None, None]:
        """See :meth:`KeyValue.watch`; a blocking iterator that follows forever."""
        stream = self._kv.watch(topic, prefix, from_revision, url=url)
        try:
            while (event := self._sync.run_coroutine(_next(stream))) is not None:
                yield event
        finally:
            self._sync.run_coroutine(stream.aclose())


async def _next(stream: AsyncIterator[KeyValueEvent]) -> KeyValueEvent | None:
    try:
        return await stream.__anext__()
    except StopAsyncIteration:
        return None
