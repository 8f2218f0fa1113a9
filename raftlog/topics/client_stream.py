"""``subscribe``: the records of some topics from a start, then live -- through ``TF`` push
fetches (``TR`` reads against a peer without them).

Following a topic uses the very read the ``read`` API uses (the peer's topic index and its
rules: current incarnation only, retention, refused batches never indexed), paging from the
last record seen, so a follower can never see a record a read would not, or miss one a read
would show (issue #11). An earlier version filtered the raw log by topic name on the client,
which replayed deleted incarnations and expired records.

Several topics are merged in log order: a record is yielded only once every topic's reads
have covered its id (each ``TR`` answer says up to which applied index it looked), so the
merged order is the log order. When nothing new is there, the follower sends each topic a
*waiting* push fetch (``TF`` with ``wait``, ``WAIT_MS``, ``min_records``/``min_bytes``;
``raftlog.topics.wire_fetch``) to one peer (``url``, or the leader as last known) and parks
until the first of them answers: the peer holds it until it applies enough records of that
topic, so an idle follower costs the peer nothing, a new record arrives within one apply,
and the answer's records are taken as they are (no second read). Every page, waiting or
not, is a ``TF`` carrying the follower's credit ``max_bytes``: the peer never sends more
(issue #27, ZEPS' flow control; the follower grants the next credit with its next fetch).

Against a peer that answers ``TF`` with ``BadRequest`` or not at all (an older raftlog, which
drops request types it does not know), the follower falls back to ``TR`` for good: waiting
reads (``TR`` with ``wait``), or -- if the peer does not know ``wait`` either, or while no
peer is known -- a poll every ``poll_interval`` seconds.

Start convention (docs/topics.md, "Start positions"): ``from_index`` is inclusive, like
``read``; the pages after the first continue *after* the last record seen.
"""

from __future__ import annotations

import asyncio
import fnmatch
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Final, Literal, Protocol

from raftlog.errors import ClusterUnavailableError, QuotaExceededError, TopicError
from raftlog.topics.records import MAX_POSITION, MAX_UINT, LoggedRecord, RecordId
from raftlog.topics.wire import DEFAULT_READ_LIMIT, ReadRequest, ReadResult, TopicInfo
from raftlog.topics.wire_fetch import FetchRequest

ORIGIN: Final = RecordId(0, 0)
POLL_INTERVAL: Final = 0.1
"""Seconds between reads while a followed topic has nothing new (without waiting reads)."""
WAIT_MS: Final = 5000
"""How long a waiting read may be held by the peer (then the follower reads again)."""


class TopicClient(Protocol):
    """What ``subscribe`` needs of ``raftlog.topics.client.TopicClient`` (a Protocol, so this
    module and that one do not import each other): the very reads the read API makes."""

    async def read(
        self,
        topic: str,
        *,
        from_index: int | None = None,
        from_position: int | None = None,
        from_time_ms: int | None = None,
        inclusive: bool = True,
        limit: int = DEFAULT_READ_LIMIT,
        url: str | None = None,
        timeout: float | None = None,
        wait_ms: int = 0,
    ) -> ReadResult:
        """A ``TR`` read of ``topic`` (``wait_ms``: a waiting read of peer ``url``)."""
        ...

    async def fetch(
        self,
        topic: str,
        url: str,
        *,
        from_index: int | None = None,
        from_position: int | None = None,
        inclusive: bool = True,
        limit: int = DEFAULT_READ_LIMIT,
        wait_ms: int = 0,
        min_records: int = 1,
        min_bytes: int | None = None,
        max_bytes: int | None = None,
        timeout: float | None = None,
    ) -> ReadResult:
        """A ``TF`` push fetch of ``topic`` from peer ``url`` (``raftlog.topics.wire_fetch``)."""
        ...

    @property
    def leader_url(self) -> str | None:
        """The leader's URL as last learned (where waiting reads go without a ``url``)."""
        ...

    async def list_topics(
        self, *, url: str | None = None, timeout: float | None = None
    ) -> tuple[str, ...]:
        """``TL``: every topic's name (a pattern follow looks for new ones)."""
        ...

    async def describe(
        self, topic: str, *, url: str | None = None, timeout: float | None = None
    ) -> TopicInfo:
        """A ``TD`` describe of ``topic``."""
        ...


@dataclass
class _Cursor:
    """Where one topic's next read starts, and what it returned that is not yielded yet."""

    topic: str
    after: RecordId | None = None
    """Continue after this id (exclusive); None: the first read uses the start below."""
    from_index: int | None = None
    from_time_ms: int | None = None
    buffered: list[LoggedRecord] = field(default_factory=list)
    horizon: RecordId = ORIGIN
    """Every record of this topic up to this id has been read."""

    def start(self) -> dict[str, object]:
        """The read arguments of the next page."""
        if self.after is not None:
            kwargs: dict[str, object] = {
                "from_index": self.after.index,
                "from_position": self.after.position,
                "inclusive": False,
            }
        elif self.from_time_ms is not None:
            kwargs = {"from_time_ms": self.from_time_ms}
        else:
            kwargs = {"from_index": self.from_index}
        return kwargs

    async def fetch(self, client: TopicClient, transport: _Transport) -> bool:
        """Read the next page into ``buffered``; True if the peer said more is waiting."""
        try:
            page = await transport.page(client, self)
        except TopicError as exc:
            if exc.name != "UnknownTopic":
                raise
            # deleted while followed: wait for it to be created again, without holding back
            # the other topics (its next incarnation's records are all newer than this)
            self.horizon = RecordId(MAX_UINT, MAX_POSITION)
            return False
        return self.take(page)

    def take(self, page: ReadResult) -> bool:
        """Buffer a page this cursor asked for; True if the peer said more is waiting."""
        self.buffered.extend(page.records)
        if self.horizon.index == MAX_UINT:  # it was deleted; it exists again
            self.horizon = ORIGIN
        if page.records:
            self.after = page.records[-1].id
        elif page.more and page.resume_at is not None:  # it stopped passing over dead ones
            self.after = _before(page.resume_at)
        if page.more:
            if self.after is not None and (page.records or page.resume_at is not None):
                self.horizon = max(self.horizon, self.after)
        else:
            self.horizon = max(self.horizon, RecordId(page.applied, MAX_POSITION))
            if self.after is None:  # nothing yet: continue after what the peer considered
                self.after = RecordId(page.applied, MAX_POSITION)
        return page.more


def _before(rid: RecordId) -> RecordId:
    """The id just before ``rid`` (a read "after" it starts at ``rid``)."""
    if rid.position > 0:
        return RecordId(rid.index, rid.position - 1)
    return RecordId(rid.index - 1, MAX_POSITION)


@dataclass
class _Transport:
    """How the follower reads a page: ``TF`` while the peer answers it, else ``TR``."""

    url: str | None
    min_records: int = 1
    min_bytes: int | None = None
    max_bytes: int | None = None
    push: bool = True
    """False once a peer answered ``TF`` with ``BadRequest``, or with silence where ``TR``
    then worked on that same peer."""

    def target(self, client: TopicClient) -> str | None:
        """The peer a push fetch or a waiting read goes to."""
        return self.url if self.url is not None else client.leader_url

    async def page(self, client: TopicClient, cursor: _Cursor, wait_ms: int = 0) -> ReadResult:
        """The cursor's next page, waiting up to ``wait_ms`` (then from ``target``) for
        ``min_records``/``min_bytes``; within the credit while ``TF`` is in use."""
        start = cursor.start()
        target = self.target(client)
        if self.push and target is not None and "from_time_ms" not in start:
            try:
                return await client.fetch(
                    cursor.topic, target, limit=DEFAULT_READ_LIMIT, wait_ms=wait_ms,
                    min_records=self.min_records if wait_ms else 1,
                    min_bytes=self.min_bytes if wait_ms else None,
                    max_bytes=self.max_bytes, **start,  # type: ignore[arg-type]
                )
            except TopicError as exc:
                if exc.name != "BadRequest":
                    raise
                self.push = False  # the same read as TR below: if that fails, it was not TF
            except ClusterUnavailableError:
                # an older peer drops TF unanswered; a TR tells whether it is just down (the
                # leader-routed read of a page without ``url`` also fails over to a new one)
                page = await self._read(
                    client, cursor, start, target if wait_ms else self.url, wait_ms
                )
                if target in (self.url, client.leader_url):  # the same peer answered TR
                    self.push = False
                return page
        return await self._read(client, cursor, start, target if wait_ms else self.url, wait_ms)

    async def _read(
        self, client: TopicClient, cursor: _Cursor, start: dict[str, object],
        url: str | None, wait_ms: int,
    ) -> ReadResult:
        return await client.read(
            cursor.topic, limit=DEFAULT_READ_LIMIT, url=url, wait_ms=wait_ms, **start  # type: ignore[arg-type]
        )


def _check_credit(min_records: int, min_bytes: int | None, max_bytes: int | None) -> None:
    """Bad thresholds or credit fail here, not as a BadRequest taken for an older peer."""
    FetchRequest(ReadRequest("x"), min_records, min_bytes, max_bytes)
    if max_bytes == 0:  # TF's wake-up: it would never bring the follower a record
        raise TopicError("BadRequest", "max_bytes must be at least 1 to follow a topic")


async def subscribe(
    topics_client: TopicClient,
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
    """Records of ``topics`` -- and, with ``pattern`` (a glob: ``orders.*``), of every topic
    matching it, including topics created later (issue #27) -- in log order: from record
    entry ``from_index`` (inclusive), from append time ``from_time_ms``, or from ``start``
    ("beginning": the oldest retained record; "end": only records published from now on);
    then live, until the caller stops.

    Raises ``TopicError`` (``UnknownTopic``) at once if a topic does not exist -- like
    ``read`` -- and ``RecordsExpiredError`` if retention removed records the follower had
    not read yet (it fell behind): skipping them silently would be a wrong answer. A topic
    deleted while followed is waited for; after it is created again, its new records follow.
    A matching topic found later (looked for whenever the follower idles, so within
    ``WAIT_MS``) is followed from its first retained record; its records that precede ones
    already yielded come after them (log order holds within each topic).

    ``min_records``/``min_bytes``: how much an idle follower's push fetch waits for before
    the peer answers (at most ``WAIT_MS``); ``max_bytes``: the credit, the most bytes of
    records (``Record.size``) one answer carries (a first record larger goes alone). Both
    are ``TF``'s (module docstring); against a peer without ``TF`` they do not apply.
    """
    if from_index is not None and from_time_ms is not None:
        raise ValueError("give from_index or from_time_ms, not both")
    _check_credit(min_records, min_bytes, max_bytes)
    transport = _Transport(url, max(min_records, 1), min_bytes, max_bytes)
    names = sorted(set(topics))
    if pattern is not None:
        names = sorted({*names, *_matching(await topics_client.list_topics(url=url), pattern)})
    elif not names:
        raise ValueError("subscribe needs at least one topic")
    idle = _Idle()
    cursors = []
    for name in names:
        cursor = _Cursor(name, from_index=from_index, from_time_ms=from_time_ms)
        info = await topics_client.describe(name, url=url)  # unknown topic: fails like read
        if from_index is None and from_time_ms is None and start == "end":
            cursor.after = info.last or info.low_water or RecordId(info.created_index, 0)
        cursors.append(cursor)
    while True:
        more = False
        for cursor in cursors:
            if not cursor.buffered:
                more = await cursor.fetch(topics_client, transport) or more
        complete = min(c.horizon for c in cursors)
        ready = sorted(
            (r for c in cursors for r in c.buffered if r.id <= complete), key=lambda r: r.id
        )
        for cursor in cursors:
            cursor.buffered = [r for r in cursor.buffered if r.id > complete]
        for item in ready:
            yield item
        if not ready and not more and not await idle.wait(topics_client, cursors, transport):
            await asyncio.sleep(poll_interval)
        if pattern is not None and not ready and not more:  # topics created meanwhile
            known = {c.topic for c in cursors}
            for name in _matching(await topics_client.list_topics(url=url), pattern):
                if name not in known:
                    cursors.append(_Cursor(name, from_index=None, from_time_ms=None))


def _matching(names: Sequence[str], pattern: str) -> list[str]:
    return [name for name in names if fnmatch.fnmatchcase(name, pattern)]


class _Idle:
    """The waiting reads of an idle follower (module docstring)."""

    def __init__(self) -> None:
        self.supported = True

    async def wait(
        self, client: TopicClient, cursors: Sequence[_Cursor], transport: _Transport
    ) -> bool:
        """Park on one waiting fetch (or read) per topic until the first answers and take
        what the answers carry; False if waiting cannot be used now (the caller polls)."""
        if not self.supported or transport.target(client) is None:
            return False
        waiting = [c for c in cursors if c.horizon.index != MAX_UINT]  # deleted: polled
        reads = {
            asyncio.ensure_future(transport.page(client, c, wait_ms=WAIT_MS)): c for c in waiting
        }
        if not reads:
            return False
        try:
            done, _ = await asyncio.wait(reads, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for read in reads:
                read.cancel()
        answered = False
        for read in done:
            if read.cancelled():
                continue
            error = read.exception()
            if error is None:
                reads[read].take(read.result())
                answered = True
            elif isinstance(error, QuotaExceededError):
                return answered  # over its waiting-reads quota (issue #25): poll instead
            elif isinstance(error, TopicError):
                if error.name == "BadRequest" and "wait" in str(error):
                    self.supported = False  # an older raftlog peer
                return answered
            else:
                raise error
        return True
