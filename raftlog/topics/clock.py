"""The leader's time stamps: what moves the log clock where no topic entry does (#11, #24).

Every time-based decision (retention, per-record TTL, transaction timeouts, request-id
expiry) is taken against the *log clock* -- the latest cluster time stamped in the applied
log (``raftlog.cluster_clock``) -- so every peer decides the same at the same applied index,
whatever its own clock says. The price: with no stamped entries the log clock stands still.
So the leader appends a *time checkpoint* (a CHECKPOINT entry carrying its cluster time,
invisible to reference peers and clients) when the log clock has not moved for
``TICK_INTERVAL_MS`` and either something is due by the cluster clock (a retained record or
TTL expires, a transaction times out) or the log clock is ``IDLE_STAMP_MS`` behind. The
latter bounds how stale the log clock a new leader or a restarted peer continues from can
be, and how late an expired request id is forgotten. It looks again exactly at the next
deadline (at most a second later), so expiry lags a deadline by one timer pass. Stamps go
through the core like any entry, so followers and a new leader see them in the log and
never stamp themselves.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Final, Protocol

TICK_INTERVAL_MS: Final = 1000
"""At most one look (and stamp) per this many ms while the log clock is not moving."""

IDLE_STAMP_MS: Final = 30_000
"""The leader stamps the log at least this often even with nothing due."""


class Proposer(Protocol):
    """The part of the core the stamper uses."""

    @property
    def is_leader(self) -> bool:
        """Only the leader stamps."""
        ...

    def stamp_time(self, time_ms: int) -> int | None:
        """Append a time checkpoint carrying ``time_ms``."""
        ...


class ExpirySource(Protocol):
    """The part of the topic machine the stamper reads."""

    @property
    def last_time(self) -> int:
        """The log clock."""
        ...

    def next_expiry(self) -> int | None:
        """Log-clock time at which the next retained record expires (None: none will)."""
        ...


class TimeSource(Protocol):
    """The peer's ``ClusterClock``."""

    def now(self) -> int:
        """Cluster time to stamp."""
        ...

    def peek(self) -> int | None:
        """Cluster time as known, observing the applied log clock."""
        ...


class TopicClock:
    """Appends time checkpoints on the leader when they are due (module docstring)."""

    def __init__(
        self,
        core: Proposer,
        machine: ExpirySource,
        clock: TimeSource,
        chores: Sequence[Callable[[], None]] = (),
    ) -> None:
        """``chores``: other leader-side timer work on topic state, run on every pass before
        the stamp (the consumer groups' dead-letter mover, issue #27)."""
        self._chores = tuple(chores)
        self._core = core
        self._machine = machine
        self._clock = clock
        self._last_tick_ms = 0
        self._next_check_ms = 0
        self.ticks = 0

    def on_timer(self) -> None:
        """Called on every timer pass of the peer; cheap unless a look is due."""
        for chore in self._chores:
            chore()
        if not self._core.is_leader:
            self._clock.peek()  # follow the applied log clock, so a new leader continues it
            return
        now = self._clock.now()  # the cluster clock, never the wall clock
        if now < self._next_check_ms:
            return
        machine = self._machine
        moved = max(self._last_tick_ms, machine.last_time)
        if now - moved < TICK_INTERVAL_MS:  # the log clock moved recently: look again then
            self._next_check_ms = moved + TICK_INTERVAL_MS
            return
        due = machine.next_expiry()
        if now - moved < IDLE_STAMP_MS and (due is None or due > now):
            later = now + TICK_INTERVAL_MS  # look again at the deadline, or in a second anyway
            self._next_check_ms = later if due is None else min(due, later)
            return
        self._last_tick_ms = now
        if self._core.stamp_time(now) is not None:
            self.ticks += 1
