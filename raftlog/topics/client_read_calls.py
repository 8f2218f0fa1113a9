"""The topic client's reads (any peer): ``read``, ``fetch``, ``describe``, ``list_topics``
and ``record_counts`` of :class:`~raftlog.topics.client.TopicClient`.

Why a module of its own: the topic client's calls fall into publishing and transactions
(``raftlog.topics.client``), consumer groups (``raftlog.topics.groups.client``) and these
reads; each group is a mixin over the same two primitives (``TopicTransport``; the reads
also use the RaftClient itself, ``ReadHost``), so the client class stays a map of what it
offers instead of one long file.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Protocol

from raftlog.client.client import RaftClient
from raftlog.client.consistency import read_level
from raftlog.errors import TopicError
from raftlog.topics import wire as rpc
from raftlog.topics import wire_counts as topic_counts
from raftlog.topics import wire_fetch
from raftlog.topics.client_reads import read_frames
from raftlog.topics.transport import TopicTransport


class ReadHost(TopicTransport, Protocol):
    """What the reads use of ``TopicClient``: its primitives and its RaftClient."""

    @property
    def raft_client(self) -> RaftClient:
        """The client the reads travel through (its timeout, leader and read levels)."""
        ...


class ReadCalls:
    """Mixed into ``TopicClient``: reading records, topics and counts (module docstring)."""

    async def read(
        self: ReadHost,
        topic: str,
        *,
        from_index: int | None = None,
        from_position: int | None = None,
        from_time_ms: int | None = None,
        inclusive: bool = True,
        limit: int = rpc.DEFAULT_READ_LIMIT,
        url: str | None = None,
        timeout: float | None = None,
        wait_ms: int = 0,
        consistency: str = "any",
        min_index: int | None = None,
    ) -> rpc.ReadResult:
        """Records of ``topic`` from a record id or an append time (see ``raftlog.topics.wire``
        ``TR``), from peer ``url`` or, by default, the leader. ``from_index`` (with
        ``from_position``) is inclusive unless ``inclusive=False``; neither start: the
        oldest retained record. A start below what retention removed raises
        ``RecordsExpiredError`` naming the first available position. ``wait_ms`` (with a
        ``url``): when nothing matches, the peer answers once a record does or after that
        long (a raftlog peer older than this option answers ``BadRequest``).
        ``consistency`` (``any``, ``read_your_writes``, ``linearizable``) and ``min_index``:
        docs/client.md, "Read consistency" (``raftlog.topics.client_reads``)."""
        req = rpc.ReadRequest(
            topic, from_index, from_position, from_time_ms, inclusive, limit, wait_ms
        )
        if wait_ms and url is None:
            raise ValueError("a waiting read names its peer (url)")
        if wait_ms and timeout is None:  # the peer may hold it that long, then answer
            timeout = self.raft_client.timeout + wait_ms / 1000
        level = read_level(self.raft_client, consistency, min_index)
        frames = await read_frames(
            self.raft_client, req, level, url, timeout=timeout, patience=wait_ms / 1000
        )
        return rpc.decode_read_response(frames)

    async def fetch(
        self: ReadHost,
        topic: str,
        url: str,
        *,
        from_index: int | None = None,
        from_position: int | None = None,
        from_time_ms: int | None = None,
        inclusive: bool = True,
        limit: int = rpc.DEFAULT_READ_LIMIT,
        wait_ms: int = 0,
        min_records: int = 1,
        min_bytes: int | None = None,
        max_bytes: int | None = None,
        timeout: float | None = None,
    ) -> rpc.ReadResult:
        """Push fetch (``TF``, :mod:`raftlog.topics.wire_fetch`) from peer ``url``: waits up
        to ``wait_ms`` for ``min_records`` records or ``min_bytes`` bytes, woken by the
        peer's apply, and sends at most ``max_bytes`` (the credit; 0: a wake-up, no records
        and ``more`` when some are there). raftlog peers only."""
        read = rpc.ReadRequest(topic, from_index, from_position, from_time_ms, inclusive, limit,
                               wait_ms)
        req = wire_fetch.FetchRequest(read, min_records, min_bytes, max_bytes)
        frames = await self.request(
            url, wire_fetch.TYPE_FETCH, wire_fetch.encode_fetch_request(req),
            timeout=self.raft_client.timeout + wait_ms / 1000 if timeout is None else timeout,
            patience=wait_ms / 1000,
        )
        return rpc.decode_read_response(frames)

    async def records_arrive(
        self: ReadHost,
        topic: str,
        url: str,
        *,
        from_index: int | None = None,
        from_position: int | None = None,
        from_time_ms: int | None = None,
        inclusive: bool = True,
        wait_ms: int,
        timeout: float | None = None,
    ) -> bool:
        """Whether ``topic`` holds records from the given start on peer ``url``, waiting up
        to ``wait_ms`` for some to come -- a ``TF`` wake-up (no credit): the answer brings
        none of them. Why: a reader that must make room for records before it reads them
        (a REST long poll's answer memory) waits so, then reads."""
        woke = await ReadCalls.fetch(
            self, topic, url, from_index=from_index, from_position=from_position,
            from_time_ms=from_time_ms, inclusive=inclusive, limit=1, wait_ms=wait_ms,
            max_bytes=0, timeout=timeout)
        return woke.more

    async def describe(
        self: ReadHost, topic: str, *, url: str | None = None, timeout: float | None = None
    ) -> rpc.TopicInfo:
        """What peer ``url`` (default: the leader) knows of ``topic`` (``TD``): its
        properties, first and last retained record, bytes published; ``UnknownTopic``."""
        frames = await self.request(url, rpc.TYPE_DESCRIBE, [topic.encode()], timeout=timeout)
        return rpc.decode_describe_response(frames)

    async def list_topics(
        self: ReadHost, *, url: str | None = None, timeout: float | None = None
    ) -> tuple[str, ...]:
        """The names of the topics peer ``url`` (default: the leader) knows (``TL``), sorted."""
        return rpc.decode_list_response(
            await self.request(url, rpc.TYPE_LIST, [], timeout=timeout)
        )

    async def record_counts(
        self: ReadHost,
        from_index: int,
        to_index: int,
        *,
        step: int = 1,
        topics: Sequence[str] | None = None,
        url: str | None = None,
        timeout: float | None = None,
        commits: bool = False,
    ) -> topic_counts.CountsResult:
        """Records per index bucket of ``step`` entries in ``[from_index, to_index]``, from
        the topic index of peer ``url`` (default: the leader) without reading entries
        (``TC``, :mod:`raftlog.topics.wire_counts`): what a parallel reader balances its
        tasks by. Raises ``TopicError`` (``UnknownTopic``) for a topic that does not exist,
        ``ClusterUnavailableError`` when the peer does not answer (peers without ``TC``).
        ``commits``: also the range's transaction commits and their stores (``BadRequest``
        from a peer that predates it).

        A peer counts a large range in parts (``partial``, ``resume``: each answer reads a
        bounded number of index keys, so a count never stalls the peer); this asks for the
        parts one after the other and returns their sum, as one answer. A peer from before
        parts refuses the key and is asked the old way (one answer, however large)."""
        req = topic_counts.CountsRequest(
            from_index,
            to_index,
            step,
            None if topics is None else tuple(topics),
            commits,
            partial=True,
        )
        try:
            counted = await _ask_counts(self, req, url, timeout)
        except TopicError as exc:
            older = "unknown counts request keys" in exc.message and "partial" in exc.message
            if exc.name != "BadRequest" or not older:
                raise
            return await _ask_counts(self, replace(req, partial=False), url, timeout)
        while counted.resume is not None:
            part = await _ask_counts(self, replace(req, resume=counted.resume), url, timeout)
            counted = topic_counts.merge_counts(counted, part)
        return counted


async def _ask_counts(
    host: ReadHost, req: topic_counts.CountsRequest, url: str | None, timeout: float | None
) -> topic_counts.CountsResult:
    frames = await host.request(
        url, topic_counts.TYPE_COUNTS, topic_counts.encode_counts_request(req), timeout=timeout
    )
    return topic_counts.decode_counts_response(frames)
