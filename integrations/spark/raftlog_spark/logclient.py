"""``LogClient``: the raftlog client as the driver and the tasks use it.

It drives an asyncio :class:`raftlog.client.RaftClient` on a private event loop in a thread
of its own (raftlog's loop-thread runner, ``raftlog.client.runner.LoopThread``), and hands
stream items over in chunks of up to ``CHUNK_ENTRIES`` entries / ``CHUNK_BYTES`` bytes:
while the caller decodes one chunk, the loop thread already pulls (and acknowledges) the
next, so the peer keeps streaming during decoding. ``SyncRaftClient`` hops threads once per
entry, which caps a task at ~8,500 entries/s on the reference machine. Leader following,
retries and fail-over are the
client's; :meth:`LogClient.stream_range` adds what a task needs on top: a range is read to
its end even if the stream ends early (a new leader whose state machine still lags) or the
client gives up for a while (an election longer than the client's timeout), as long as
progress resumes within ``timeout`` seconds.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import dataclasses
import time
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator
from types import TracebackType
from typing import Any, Final, TypeVar

from raftlog.client import IndexedEntry, RaftClient, RequestLogInfoResponse, SnapshotChunk
from raftlog.client.consistency import read_index
from raftlog.client.runner import LoopThread
from raftlog.errors import ClusterUnavailableError, RaftlogError, TopicError
from raftlog.security.settings import CurveClient
from raftlog.topics.client import TopicClient
from raftlog.topics.client_view import TopicView
from raftlog.topics.records import Record
from raftlog.topics.wire_counts import CountsResult
from raftlog_spark.errors import RaftlogSourceError, data_lost, diagnose, stalled_range

T = TypeVar("T")

CHUNK_ENTRIES: Final = 4096
CHUNK_BYTES: Final = 256 * 1024
RETRY_PAUSE: Final = 0.1
PUBLISH_WINDOW: Final = 8
"""Entries a sink task has in flight (each waits for its commit)."""
COUNTS_TIMEOUT: Final = 3.0
"""Seconds to wait for ``TC`` record counts before planning by entries (a peer without
``TC`` drops the request)."""


async def _pull(
    stream: AsyncIterator[Any], max_items: int, max_bytes: int
) -> tuple[list[IndexedEntry | SnapshotChunk], bool]:
    """Up to ``max_items`` items (or ``max_bytes`` of data) and whether the stream ended."""
    out: list[IndexedEntry | SnapshotChunk] = []
    size = 0
    while len(out) < max_items and size < max_bytes:
        try:
            item = await stream.__anext__()
        except StopAsyncIteration:
            return out, True
        out.append(item)
        size += len(item.entry.data) if isinstance(item, IndexedEntry) else len(item.data)
    return out, False


class LogClient:
    """A raftlog client for one thread (a task, or the driver's planning worker)."""

    def __init__(
        self,
        peers: tuple[str, ...],
        ident: str,
        timeout: float,
        curve: CurveClient | None = None,
        *,
        answered_before: bool = False,
    ) -> None:
        self.peers = peers
        self.answered_before = answered_before
        """The cluster answered this read before (a task: planning talked to it), so
        silence is the cluster going away, not a wrong ident (:func:`diagnose`)."""
        self.ident = ident
        self.timeout = timeout
        self.curve = curve
        self._runner = LoopThread("raftlog-spark-client", owner="LogClient")
        self._runner.start()
        self._loop = self._runner.loop
        self._topics: TopicClient | None = None
        try:
            self._client: RaftClient = self._run(self._create())
        except BaseException:
            self._stop_loop()
            raise

    async def _create(self) -> RaftClient:
        return RaftClient(list(self.peers), self.ident, timeout=self.timeout, curve=self.curve)

    @property
    def topics(self) -> TopicClient:
        """A topic client over the same connections (created on first use)."""
        if self._topics is None:
            self._topics = TopicClient(self._client)
        return self._topics

    def _submit(self, coro: Any) -> concurrent.futures.Future[Any]:
        """Start ``coro`` on the client's loop thread."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:  # no running loop in this thread: the normal case
            return self._runner.submit(coro)
        coro.close()
        raise RuntimeError("LogClient cannot be used inside a running event loop")

    def _run(self, coro: Any) -> Any:
        return self._submit(coro).result()

    def _stop_loop(self) -> None:
        self._runner.stop(timeout=None)  # its thread closes the loop

    def close(self) -> None:
        if self._loop.is_closed():
            return
        try:
            if self._topics is not None:
                with contextlib.suppress(Exception):
                    self._run(self._topics.aclose())
            with contextlib.suppress(Exception):
                self._run(self._client.aclose())
            with contextlib.suppress(Exception):
                self._run(self._loop.shutdown_asyncgens())
        finally:
            self._stop_loop()

    def __enter__(self) -> LogClient:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # -- calls -----------------------------------------------------------------------------
    def log_info(self, consistency: str = "any") -> RequestLogInfoResponse:
        """The leader's RequestLogInfo; a diagnosed :class:`RaftlogSourceError` if none
        answers within the timeout. ``linearizable``: its commit and applied indexes raised
        to the leader's read index (``RI``), so a range planned up to them covers every
        write acknowledged before this call (``stream_range`` waits for the leader)."""
        try:
            info: RequestLogInfoResponse = self._run(self._log_info(consistency))
        except ClusterUnavailableError as exc:
            raise RaftlogSourceError(self._diagnose(exc)) from exc
        return info

    def _diagnose(self, exc: BaseException, waited: float | None = None) -> str:
        seen, peers = self.answered_before, self.peers
        return diagnose(peers, self.ident, self.timeout, exc, answered_before=seen, waited=waited)

    def call(self, coro: Any) -> Any:
        """Run a call of the client or its :attr:`topics` (a coroutine) on the client's
        loop; no answer within the timeout is a diagnosed source error."""
        return self._call(coro)

    def _call(self, coro: Any) -> Any:
        """Run a client call; no answer within the timeout is a diagnosed source error."""
        try:
            return self._run(coro)
        except ClusterUnavailableError as exc:
            raise RaftlogSourceError(self._diagnose(exc)) from exc

    def check_topics(self, names: frozenset[str]) -> None:
        """Raise raftlog's ``UnknownTopic`` ``TopicError`` for a name that is no topic (the
        peers' rule: ``TD`` describe)."""
        for name in sorted(names):
            self._call(self.topics.describe(name))

    def topic_view(self, topics: frozenset[str] | None) -> TopicView:
        """The topic read rules of ``topics`` (None: all) at the leader's applied index
        (:class:`raftlog.topics.client_view.TopicView`); topics that do not exist are absent."""
        view: TopicView = self._call(self._topic_view(topics))
        return view

    async def _topic_view(self, topics: frozenset[str] | None) -> TopicView:
        names = await self.topics.list_topics() if topics is None else sorted(topics)
        answers = await asyncio.gather(
            *(self.topics.describe(name) for name in names), return_exceptions=True
        )
        infos = []
        for answer in answers:
            if isinstance(answer, TopicError) and answer.name == "UnknownTopic":
                continue  # deleted between list and describe
            if isinstance(answer, BaseException):
                raise answer
            infos.append(answer)
        return TopicView.of(infos)

    def cluster_urls(self) -> tuple[str, ...]:
        """Every peer's URL as the cluster reports its configuration (the seeds if it
        reports none): where the planner spreads the tasks' reads."""
        urls: tuple[str, ...] = self._call(self._cluster_urls())
        return urls

    async def _cluster_urls(self) -> tuple[str, ...]:
        info = await self._client.request_config()
        return tuple(peer.url for peer in info.peers) or self.peers

    def list_topics(self) -> tuple[str, ...]:
        names: tuple[str, ...] = self._call(self.topics.list_topics())
        return names

    def record_counts(
        self, lo: int, hi: int, step: int, topics: frozenset[str] | None
    ) -> CountsResult | None:
        """Records per bucket of ``step`` entries in ``[lo, hi]`` from the leader's topic
        index (``TC``), or None from a peer that does not answer it in time."""
        counts: CountsResult | None = self._run(self._record_counts(lo, hi, step, topics))
        return counts

    async def _record_counts(
        self, lo: int, hi: int, step: int, topics: frozenset[str] | None, commits: bool = False
    ) -> CountsResult | None:
        """``commits``: the range's transaction commits too (issue #31), when the peer
        knows how (a peer from before answers ``BadRequest``: asked again without)."""
        names = None if topics is None else sorted(topics)
        timeout = min(self.timeout, COUNTS_TIMEOUT)
        try:
            return await self.topics.record_counts(
                lo, hi, step=step, topics=names, timeout=timeout, commits=commits
            )
        except ClusterUnavailableError:
            return None
        except TopicError as exc:
            if not commits or exc.name != "BadRequest":
                raise
        return await self._record_counts(lo, hi, step, topics)

    def plan_facts(
        self,
        view_topics: frozenset[str] | None,
        lo: int,
        hi: int,
        step: int,
        counted: frozenset[str] | None,
        *,
        with_view: bool = True,
    ) -> tuple[TopicView | None, CountsResult | None, tuple[str, ...]]:
        """What planning a read asks the cluster, asked at once (each request's latency
        is paid once, not one after the other): the topic view of ``view_topics`` (unless
        not ``with_view``), :meth:`record_counts` with the range's transaction commits
        (when there is a view: topic rows are read) and :meth:`cluster_urls`."""

        async def facts() -> tuple[TopicView | None, CountsResult | None, tuple[str, ...]]:
            view = self._topic_view(view_topics) if with_view else asyncio.sleep(0, None)
            counts = self._record_counts(lo, hi, step, counted, commits=with_view)
            return await asyncio.gather(view, counts, self._cluster_urls())

        result: tuple[TopicView | None, CountsResult | None, tuple[str, ...]] = self._call(facts())
        return result

    def publish_all(
        self, items: Iterator[tuple[bytes, list[Record] | bytes]], window: int = PUBLISH_WINDOW
    ) -> tuple[int, int]:
        """Write every ``(request id, records or raw data)`` in order, up to ``window`` in
        flight (sent in order over one connection, so the leader appends them in order);
        ``(rows, entries)`` once all are committed. The first failure cancels the rest and
        is raised (what was written stays; a retry finds it by request id)."""
        try:
            counted: tuple[int, int] = self._run(self._publish_all(items, window))
        except ClusterUnavailableError as exc:
            raise RaftlogSourceError(self._diagnose(exc)) from exc
        return counted

    async def _publish_all(
        self, items: Iterator[tuple[bytes, list[Record] | bytes]], window: int
    ) -> tuple[int, int]:
        pending: set[asyncio.Future[Any]] = set()
        rows = entries = 0
        try:
            for rid, item in items:
                while len(pending) >= window:
                    done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
                    for future in done:
                        future.result()
                call: Coroutine[Any, Any, Any]
                if isinstance(item, bytes):
                    call = self._client.request_update(item, rid, timeout=self.timeout)
                    rows += 1
                else:
                    call = self.topics.publish_batch(item, request_id=rid, timeout=self.timeout)
                    rows += len(item)
                pending.add(asyncio.ensure_future(call))
                entries += 1
                await asyncio.sleep(0)  # let it go out before the next one: in order
            if pending:
                await asyncio.gather(*pending)
        finally:
            for future in pending:
                future.cancel()
        return rows, entries

    def request_update(self, data: bytes, request_id: bytes) -> int:
        """Append raw ``data`` with ``request_id`` (idempotent like :meth:`publish_batch`)."""
        index: int = self._call(self._client.request_update(data, request_id, timeout=self.timeout))
        return index

    def publish_batch(self, records: list[Record], request_id: bytes) -> int:
        """Publish ``records`` as one entry with ``request_id``; its index. A retry with the
        same id (a task retried, a query restarted) returns the first index instead of
        appending again (the core's request-id rule)."""
        ids = self._call(
            self.topics.publish_batch(records, request_id=request_id, timeout=self.timeout)
        )
        return int(ids[0].index) if ids else 0

    def chunks(
        self,
        prev_index: int,
        count: int,
        *,
        chunk_entries: int = CHUNK_ENTRIES,
        from_peer: str | None = None,
    ) -> Iterator[list[IndexedEntry | SnapshotChunk]]:
        """The raw stream of ``request_entries(prev_index, count)`` in chunks (from the peer
        ``from_peer`` first, follower or not: committed entries only)."""
        stream = self._client.request_entries(
            prev_index, count, timeout=self.timeout, from_peer=from_peer
        )
        # The next chunk is pulled (and its batches acknowledged) on the loop thread while
        # the caller decodes this one, so the peer keeps streaming meanwhile.
        pending: concurrent.futures.Future[Any] | None = self._submit(
            _pull(stream, chunk_entries, CHUNK_BYTES)
        )
        try:
            while pending is not None:
                items, ended = pending.result()
                pending = None if ended else self._submit(_pull(stream, chunk_entries, CHUNK_BYTES))
                if items:
                    yield items
        finally:
            if pending is not None:
                pending.cancel()
                with contextlib.suppress(BaseException):
                    pending.result()
            if not self._loop.is_closed():
                with contextlib.suppress(Exception):
                    self._run(stream.aclose())

    def stream_range(
        self,
        lo: int,
        hi: int,
        *,
        fail_on_data_loss: bool = True,
        chunk_entries: int = CHUNK_ENTRIES,
        clock: Callable[[], float] = time.monotonic,
        from_peer: str | None = None,
    ) -> Iterator[list[IndexedEntry]]:
        """Every entry ``lo..hi`` (inclusive, all committed), in order, in chunks.

        ``from_peer`` is asked first (any peer serves committed entries, up to its own
        applied index); whatever stops that stream short -- the peer is down, lags, has
        compacted the range, or is a reference follower -- the rest comes from the leader.

        Resumes after the last entry delivered whenever the stream stops short; fails with
        :class:`RaftlogSourceError` after ``timeout`` seconds without progress, and with
        :class:`RaftlogDataLossError` when part of the range was compacted (unless
        ``fail_on_data_loss`` is false: then the compacted part is skipped).
        """
        next_index = lo
        progress = clock()
        checked_first = True  # a compacted start shows as snapshot chunks: checked then
        last_error: BaseException | None = None
        while next_index <= hi:
            if not checked_first:
                info = self.log_info()
                checked_first = True
                if info.first_index > next_index:
                    next_index = self._lost(next_index, info.first_index, hi, fail_on_data_loss)
                    continue
            compacted = False
            try:
                count = hi - next_index + 1
                peer, from_peer = from_peer, None  # one attempt there, then the leader
                for chunk in self.chunks(
                    next_index - 1, count, chunk_entries=chunk_entries, from_peer=peer
                ):
                    entries: list[IndexedEntry] = []
                    for item in chunk:
                        if isinstance(item, SnapshotChunk):
                            compacted = True
                            break
                        if item.index >= next_index:
                            entries.append(item)
                    if entries:
                        next_index = entries[-1].index + 1
                        progress = clock()
                        yield entries
                    if compacted:
                        break
            except ClusterUnavailableError as exc:
                last_error = exc
            except RaftlogError as exc:  # e.g. a malformed answer: retry like silence
                last_error = exc
            if compacted:
                checked_first = False
                continue
            if next_index > hi:
                return
            if clock() - progress > self.timeout:
                waited = clock() - progress
                raise self._no_progress(next_index, hi, last_error, waited) from last_error
            time.sleep(RETRY_PAUSE)  # the stream stopped short: a new leader catching up

    async def _log_info(self, consistency: str) -> RequestLogInfoResponse:
        info = await self._client.request_log_info()
        if consistency != "linearizable":
            return info
        index = await read_index(self._client)
        return dataclasses.replace(
            info,
            commit_index=max(info.commit_index, index),
            last_applied=max(info.last_applied, index),
        )

    def _no_progress(
        self, next_index: int, hi: int, last_error: BaseException | None, waited: float
    ) -> RaftlogSourceError:
        """A task's range stopped for ``timeout``: the cluster went away (which peers do
        what: :func:`diagnose`), or the leader serves no further entries."""
        if isinstance(last_error, ClusterUnavailableError):
            self.answered_before = True  # it served this range's planning
            return RaftlogSourceError(
                f"{self._diagnose(last_error, waited)}; reading entries {next_index}..{hi}"
            )
        return stalled_range(next_index, hi, self.timeout, self.peers, last_error)

    def _lost(self, next_index: int, first_index: int, hi: int, fail: bool) -> int:
        last_lost = min(first_index - 1, hi)
        if fail:
            info = self.log_info()
            last = min(info.commit_index, info.last_applied)
            raise data_lost(next_index, last_lost, info.first_index, last)
        return last_lost + 1
