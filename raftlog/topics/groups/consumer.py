"""``Consumer``: records of a consumer group as an async iterator, each with ``ack()`` /
``nack()`` (issue #27); ``SyncConsumer`` is its blocking face.

Usage::

    async with TopicClient(raft) as topics:
        async with Consumer(topics, "workers") as consumer:
            async for message in consumer:
                handle(message.value)
                await message.ack()

Queue groups: the consumer leases up to ``batch`` records at a time to its member name
(default: host and pid, so two processes never share one), hands them out in id order and
leases more once it has handed out what it holds. ``ack()`` ends the lease (done), ``nack()``
gives the record back for redelivery now; a record neither acked nor nacked within the
group's ``ack_wait_ms`` is redelivered by the cluster to any member. While nothing is
available it waits ``poll_interval`` (doubling up to ``max_poll_interval``); an empty look
costs no log write (the leader refuses a lease that would hand out nothing).

Stream groups: records of the group's topics from its committed positions on (the
beginning where none is committed), in log order across the topics. ``ack()`` marks the
record consumed; the consumer commits the position past the acked records before it reads
more and on ``close``, so a restarted member resumes exactly after the last commit.
"""

from __future__ import annotations

import asyncio
import fnmatch
import os
import socket
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from types import TracebackType
from typing import TYPE_CHECKING, Any

from raftlog.topics.groups.model import GroupInfo
from raftlog.topics.records import LoggedRecord, Record, RecordId

if TYPE_CHECKING:
    from raftlog.topics.client import TopicClient
    from raftlog.topics.sync_client import SyncTopicClient

DEFAULT_BATCH = 100
POLL_INTERVAL = 0.02
MAX_POLL_INTERVAL = 0.5


def default_member() -> str:
    """``host-pid``: unique per process, readable in ``groups describe``."""
    return f"{socket.gethostname()[:100]}-{os.getpid()}"


@dataclass(eq=False)
class Message:
    """One delivered record; ``ack`` or ``nack`` it once handled."""

    item: LoggedRecord
    deliveries: int
    """1 on the first delivery, more on a redelivery (queue groups; always 1 for streams)."""
    _consumer: Consumer = field(repr=False)
    done: bool = False

    @property
    def topic(self) -> str:
        return self.item.record.topic

    @property
    def id(self) -> RecordId:
        return self.item.id

    @property
    def record(self) -> Record:
        return self.item.record

    @property
    def value(self) -> bytes:
        return self.item.record.value

    async def ack(self) -> None:
        """Done with it: never redelivered (queue); consumed up to here (stream)."""
        await self._consumer.ack([self])

    async def nack(self, reason: str = "") -> None:
        """Give it back for redelivery now (queue groups; ``reason`` goes to the dead-letter
        headers if it dies). On a stream group it rewinds: the record is read again."""
        await self._consumer.nack([self], reason)


class Consumer:
    """Records of group ``group`` (module docstring). The group must exist."""

    def __init__(
        self,
        topics: TopicClient,
        group: str,
        *,
        member: str | None = None,
        batch: int = DEFAULT_BATCH,
        poll_interval: float = POLL_INTERVAL,
        max_poll_interval: float = MAX_POLL_INTERVAL,
    ) -> None:
        self._topics = topics
        self.group = group
        self.member = member or default_member()
        self._batch = batch
        self._poll = (poll_interval, max_poll_interval)
        self._info: GroupInfo | None = None
        self._ready: list[Message] = []
        self._handed: dict[tuple[str, RecordId], int] = {}
        """Records handed out and not yet acked, with the delivery they came with (a lease
        that ran out and came back to this member is a new delivery: handed out again)."""
        self._stream_next: dict[str, RecordId | None] = {}
        self._acked: dict[str, RecordId] = {}
        self._closed = False

    async def __aenter__(self) -> Consumer:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    def __aiter__(self) -> AsyncIterator[Message]:
        return self

    async def __anext__(self) -> Message:
        message = await self.next_message()
        if message is None:
            raise StopAsyncIteration
        return message

    async def _group(self) -> GroupInfo:
        if self._info is None:
            self._info = await self._topics.describe_group(self.group)
            for topic, position in self._info.positions.items():
                self._stream_next[topic] = position.next_record
        return self._info

    async def next_message(self, timeout: float | None = None) -> Message | None:
        """The next record, waiting for one (at most ``timeout`` seconds: None when none
        came); None once closed."""
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + timeout
        pause = self._poll[0]
        while not self._closed:
            if self._ready:
                return self._ready.pop(0)
            await self._fill()
            if self._ready:
                continue
            if deadline is not None and loop.time() >= deadline:
                return None
            wait = pause if deadline is None else min(pause, max(0.0, deadline - loop.time()))
            await asyncio.sleep(wait)
            pause = min(pause * 2, self._poll[1])
        return None

    async def _fill(self) -> None:
        info = await self._group()
        if info.mode == "queue":
            leased = await self._topics.lease(self.group, self.member, self._batch)
            for x in leased:
                if self._handed.get((x.topic, x.id)) == x.deliveries or x.item is None:
                    continue
                self._handed[(x.topic, x.id)] = x.deliveries
                self._ready.append(Message(x.item, x.deliveries, self))
            return
        await self.commit()
        names = list(info.topics)
        if info.pattern is not None:
            names += [n for n in await self._topics.list_topics()
                      if fnmatch.fnmatchcase(n, info.pattern) and n not in names]
        found: list[LoggedRecord] = []
        for topic in names:
            start = self._stream_next.get(topic)
            if start is None:
                result = await self._topics.read(topic, limit=self._batch)
            else:
                result = await self._topics.read(
                    topic, from_index=start.index, from_position=start.position,
                    limit=self._batch,
                )
            found.extend(result.records)
        found.sort(key=lambda item: item.id)
        for item in found[: self._batch]:
            self._stream_next[item.record.topic] = RecordId(item.id.index, item.id.position + 1)
            self._ready.append(Message(item, 1, self))

    async def ack(self, messages: list[Message]) -> None:
        """Ack several messages with one command (queue) or mark them consumed (stream)."""
        todo = [m for m in messages if not m.done]
        if not todo:
            return
        info = await self._group()
        if info.mode == "queue":
            await self._topics.ack(self.group, self.member, [(m.topic, m.id) for m in todo])
            for m in todo:
                self._handed.pop((m.topic, m.id), None)
        else:
            for m in todo:
                past = RecordId(m.id.index, m.id.position + 1)
                self._acked[m.topic] = max(self._acked.get(m.topic, past), past)
        for m in todo:
            m.done = True

    async def nack(self, messages: list[Message], reason: str = "") -> None:
        """Give messages back: redelivered now (queue); read again (stream: a rewind)."""
        todo = [m for m in messages if not m.done]
        if not todo:
            return
        info = await self._group()
        if info.mode == "queue":
            await self._topics.nack(self.group, self.member, [(m.topic, m.id) for m in todo],
                                    reason=reason)
            for m in todo:
                self._handed.pop((m.topic, m.id), None)
        else:
            for m in todo:
                current = self._stream_next.get(m.topic)
                self._stream_next[m.topic] = m.id if current is None else min(current, m.id)
            self._ready = [r for r in self._ready if r.topic not in {m.topic for m in todo}]
        for m in todo:
            m.done = True

    async def commit(self) -> None:
        """Stream groups: commit the position past every acked record (a no-op otherwise)."""
        acked, self._acked = self._acked, {}
        for topic, position in acked.items():
            await self._topics.commit_group_position(
                self.group, topic, position, metadata="consumer", member=self.member
            )

    async def close(self) -> None:
        """Commit what was acked (stream groups) and stop; leases not acked run out and are
        redelivered (queue groups)."""
        if self._closed:
            return
        self._closed = True
        if self._acked:
            await self.commit()


class SyncConsumer:
    """The blocking face of :class:`Consumer`: ``for message in consumer: ...; message.ack()``
    -- messages are :class:`SyncMessage`."""

    def __init__(self, topics: SyncTopicClient, group: str, **options: Any) -> None:
        self._client = topics
        self._consumer: Consumer = topics._run(self._make(topics, group, options))

    @staticmethod
    async def _make(topics: SyncTopicClient, group: str, options: dict[str, Any]) -> Consumer:
        return Consumer(topics._topics, group, **options)

    @property
    def member(self) -> str:
        return self._consumer.member

    def __enter__(self) -> SyncConsumer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __iter__(self) -> Iterator[SyncMessage]:
        while (message := self.next_message()) is not None:
            yield message

    def next_message(self, timeout: float | None = None) -> SyncMessage | None:
        """See ``Consumer.next_message``."""
        message = self._client._run(self._consumer.next_message(timeout))
        return None if message is None else SyncMessage(message, self._client)

    def ack(self, messages: list[SyncMessage]) -> None:
        self._client._run(self._consumer.ack([m.message for m in messages]))

    def close(self) -> None:
        self._client._run(self._consumer.close())


@dataclass
class SyncMessage:
    """A :class:`Message` with blocking ``ack`` / ``nack``."""

    message: Message
    _client: SyncTopicClient = field(repr=False)

    @property
    def topic(self) -> str:
        return self.message.topic

    @property
    def id(self) -> RecordId:
        return self.message.id

    @property
    def value(self) -> bytes:
        return self.message.value

    @property
    def deliveries(self) -> int:
        return self.message.deliveries

    def ack(self) -> None:
        self._client._run(self.message.ack())

    def nack(self, reason: str = "") -> None:
        self._client._run(self.message.nack(reason))
