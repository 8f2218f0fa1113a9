"""The log-compaction policy: when to snapshot the state machine, and how far to compact.

How far: never past what the state machine has applied (the snapshot is its state), never
past the oldest request id still remembered (docs/protocol.md §12.7: a peer that installs the
snapshot must still recognise a retry of any id the snapshot covers), and never past what a
registered :class:`CompactionLimit` allows -- the seam for state that must outlive the log
prefix (e.g. topic records whose retention has not expired: their owner registers a limit
instead of this module learning about topics).

When: on demand (``raftlog-admin compact``), and from the peer's housekeeping once
``log_compaction_threshold`` entries have been applied past the last snapshot. The same
housekeeping forgets expired request ids first (``request_id_ttl``, judged by the applied log
clock) and bounds their number (``request_id_cache_max``), which is what lets compaction move
forward.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from raftlog.metrics import PeerMetrics
from raftlog.server.interfaces import EventLog
from raftlog.statemachine.base import SnapshotBuild
from raftlog.storage.base import SnapshotMeta

CompactionLimit = Callable[[], int | None]
"""The highest index the log may be compacted to right now, or None for no limit."""


class CompactableLog(Protocol):
    """The log operations the policy uses."""

    @property
    def snapshot_index(self) -> int:
        """Last index covered by the installed snapshot."""
        ...

    @property
    def first_index(self) -> int:
        """The first readable index."""
        ...

    @property
    def last_index(self) -> int:
        """The last index in the log."""
        ...

    def oldest_request_index(self) -> int | None:
        """Lowest index still in the request-id index."""
        ...

    def compact(self, snapshot_index: int, snapshot_term: int) -> None:
        """Drop the prefix up to ``snapshot_index`` (durable on return)."""
        ...

    def prune_request_ids(self, before_index: int) -> int:
        """Forget the request ids of entries below ``before_index``."""
        ...

    def prune_expired_request_ids(self, now_ms: int, ttl_ms: int | None) -> int:
        """Forget expired ids from the oldest on."""
        ...


class SnapshotWriter(Protocol):
    """Where the state machine's snapshot goes."""

    def install(self, index: int, term: int, data: bytes) -> SnapshotMeta:
        """Make ``data`` the installed snapshot (durable on return)."""
        ...


class SnapshotSource(Protocol):
    """The state machine, as the policy sees it."""

    @property
    def last_applied(self) -> int:
        """Index of the last entry applied."""
        ...

    def snapshot_build(self, index: int) -> SnapshotBuild:
        """The state as of ``index`` (at most ``last_applied``), built a step at a time
        while apply goes on."""
        ...


@dataclass(slots=True)
class _Building:
    """A compaction under way: its snapshot is being built (``CompactionPolicy.step``)."""

    index: int
    term: int
    build: SnapshotBuild
    started: float
    waiting: list[Callable[[int | None], None]] = field(default_factory=list)


class CompactionPolicy:
    """Decides and performs compactions of one peer's log."""

    def __init__(
        self,
        log: CompactableLog,
        snapshots: SnapshotWriter,
        machine: SnapshotSource,
        term_at: Callable[[int], int | None],
        events: EventLog,
        *,
        threshold: int | None,
        request_id_ttl: int | None,
        request_id_cache_max: int | None,
        metrics: PeerMetrics | None = None,
    ) -> None:
        self._log = log
        self._metrics = metrics if metrics is not None else PeerMetrics()
        self._snapshots = snapshots
        self._machine = machine
        self._term_at = term_at
        self._events = events
        self._threshold = threshold
        self._request_id_ttl = request_id_ttl
        self._request_id_cache_max = request_id_cache_max
        self._limits: list[CompactionLimit] = []
        self._building: _Building | None = None

    def add_limit(self, limit: CompactionLimit) -> None:
        """Register state that must not be compacted away (see the module docstring)."""
        self._limits.append(limit)

    def target(self) -> int:
        """The index a compaction now would snapshot at (the minimum of every bound)."""
        index = self._machine.last_applied
        oldest = self._log.oldest_request_index()
        if oldest is not None:
            index = min(index, oldest - 1)
        for limit in self._limits:
            bound = limit()
            if bound is not None:
                index = min(index, bound)
        return index

    def compact(self) -> int | None:
        """A compaction at once: :meth:`start`, then :meth:`step` until it is done (tools,
        tests; the peer steps on its timer passes); the snapshot index, or None when
        nothing could be compacted."""
        done: list[int | None] = []
        self.start(done.append)
        while not done:
            self.step()
        return done[0]

    @property
    def building(self) -> int | None:
        """The index of the snapshot being built (None: no compaction under way)."""
        return None if self._building is None else self._building.index

    def start(self, on_done: Callable[[int | None], None] | None = None) -> None:
        """Begin a compaction at ``target()``: the snapshot is built a step at a time on
        the timer passes (:meth:`step`) -- built at once it held the loop for seconds with
        many topics or compacted keys -- then installed and the log prefix dropped.
        ``on_done`` gets the snapshot index (None: nothing compacted); a start while one is
        under way waits for that one."""
        if self._building is not None:
            if on_done is not None:
                self._building.waiting.append(on_done)
            return
        index = self.target()
        term = self._term_at(index) if index > self._log.snapshot_index else None
        if term is None:
            if on_done is not None:
                on_done(None)
            return
        build = self._machine.snapshot_build(index)
        self._building = _Building(index, term, build, time.perf_counter())
        if on_done is not None:
            self._building.waiting.append(on_done)

    def step(self) -> None:
        """Each timer pass: one step of the snapshot under way; once built, install it and
        drop the log prefix -- unless the log moved past it meanwhile (a snapshot from the
        leader was installed) or a restore made it void."""
        building = self._building
        if building is None:
            return
        data = building.build.step()
        if data is None and not building.build.cancelled:
            return
        self._building = None
        done = None
        if data is not None and building.index > self._log.snapshot_index:
            self._finish(building.index, building.term, data, building.started)
            done = building.index
        for waiting in building.waiting:
            waiting(done)

    def _finish(self, index: int, term: int, data: bytes, started: float) -> None:
        """Install the snapshot, drop the log prefix: both durable on return."""
        self._snapshots.install(index, term, data)
        self._log.compact(index, term)
        self._metrics.compactions.inc()
        self._metrics.compaction_seconds.observe(time.perf_counter() - started)
        self._events.info(
            "log_compacted", index=index, term=term, first_index=self._log.first_index
        )

    def housekeeping(self, log_clock_ms: int) -> int | None:
        """Forget expired request ids (§12.7), then start a compaction if the threshold is
        reached; returns the index of the snapshot being built (None: none).

        ``log_clock_ms`` is the log clock this peer has applied (``raftlog.cluster_clock``),
        never its wall clock: an id is forgotten only once it is expired by the same
        never-decreasing clock the leader's freshness check uses, so a retry of a forgotten id
        is refused as expired, never appended again, and every peer forgets the same ids at
        the same applied index (issue #24: a wall step of +9 h wiped the cache)."""
        log = self._log
        if self._request_id_ttl is not None and log_clock_ms > 0:
            log.prune_expired_request_ids(log_clock_ms, self._request_id_ttl)
        if self._request_id_cache_max is not None:
            log.prune_request_ids(log.last_index - self._request_id_cache_max + 1)
        threshold = self._threshold
        if threshold and self._machine.last_applied - log.snapshot_index >= threshold:
            self.start()
            return self.building
        return None
