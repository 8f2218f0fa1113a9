"""The leader's clock ticks: what makes topic retention advance on an idle cluster (#11).

Retention runs on the *log clock* -- the append times the leader stamps into topic entries
(``raftlog.statemachine.topic_reads``) -- so every peer expires exactly the same records at
the same applied index, whatever its own clock says. The price: with no new topic entries
the log clock stands still and nothing would expire. So the leader appends a clock tick (a
STATE entry holding only a stamped time, ``raftlog.records.encode_clock_tick``) when a
retained record's expiry time has passed by its wall clock and nothing has moved the log
clock for ``TICK_INTERVAL_MS``. It looks again exactly at the next deadline (at most a
second later), so expiry lags a deadline by one timer pass; a cluster with nothing to expire
appends nothing. Ticks go through the core like any update (their own request ids), so
followers and a new leader see them in the log and never tick themselves.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final, Protocol

from raftlog.ids import RequestIdGenerator
from raftlog.records import AppendClock, encode_clock_tick

TICK_INTERVAL_MS: Final = 1000
"""At most one look (and tick) per this many ms while the log clock is not moving."""


class Proposer(Protocol):
    """The part of the core the ticker uses."""

    @property
    def is_leader(self) -> bool:
        """Only the leader ticks."""
        ...

    def propose(self, request_id: bytes, data: bytes, now_ms: int) -> object:
        """Append a STATE entry (RequestUpdate without a client)."""
        ...


class ExpirySource(Protocol):
    """The part of the topic machine the ticker reads."""

    @property
    def last_time(self) -> int:
        """The log clock."""
        ...

    def next_expiry(self) -> int | None:
        """Log-clock time at which the next retained record expires (None: none will)."""
        ...


class TopicClock:
    """Appends clock ticks on the leader when something is due (module docstring)."""

    def __init__(
        self,
        core: Proposer,
        machine: ExpirySource,
        stamps: AppendClock,
        now_ms: Callable[[], int],
    ) -> None:
        self._core = core
        self._machine = machine
        self._stamps = stamps
        self._now_ms = now_ms
        self._ids = RequestIdGenerator()
        self._last_tick_ms = 0
        self._next_check_ms = 0
        self.ticks = 0

    def on_timer(self) -> None:
        """Called on every timer pass of the peer; cheap unless a look is due."""
        if not self._core.is_leader:
            return
        now = self._now_ms()
        if now < self._next_check_ms:
            return
        machine = self._machine
        moved = max(self._last_tick_ms, machine.last_time)
        if now - moved < TICK_INTERVAL_MS:  # the log clock moved recently: look again then
            self._next_check_ms = moved + TICK_INTERVAL_MS
            return
        due = machine.next_expiry()
        if due is None or due > now:  # look again at the deadline, or in a second anyway
            later = now + TICK_INTERVAL_MS
            self._next_check_ms = later if due is None else min(due, later)
            return
        self._last_tick_ms = now
        stamp = self._stamps.last_ms = max(self._stamps.last_ms, now)  # stamps never go back
        self._core.propose(self._ids.next(), encode_clock_tick(stamp), now)
        self.ticks += 1
