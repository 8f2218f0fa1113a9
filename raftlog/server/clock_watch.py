"""Shows operators a host clock far from the cluster clock (issue #24): the
``raftlog_wall_clock_offset_seconds`` metric and a ``wall_clock_off`` warning at most once a
minute. Nothing is decided by the host's clock (``raftlog.cluster_clock``); a far-off clock
only misleads people (timestamps) and, in a mixed cluster, reference peers."""

from __future__ import annotations

from typing import Final, Protocol

from raftlog.metrics import PeerMetrics
from raftlog.rpc.clock import CLOCK_WARN_MS
from raftlog.server.interfaces import EventLog

WARN_EVERY_S: Final = 60.0


class OffsetSource(Protocol):
    """The peer's ``ClusterClock``."""

    def wall_offset_ms(self) -> int | None:
        """Wall clock minus cluster clock (None: no time in the log yet)."""
        ...


class ClockWatch:
    """Called from the peer's housekeeping (about once a second)."""

    def __init__(self, clock: OffsetSource, metrics: PeerMetrics, log: EventLog) -> None:
        self._clock = clock
        self._gauge = metrics.wall_clock_offset_seconds
        self._log = log
        self._next_warning = 0.0

    def check(self, now: float) -> None:
        """Update the metric; warn while the offset is ``CLOCK_WARN_MS`` or more (``now``:
        the monotonic time of this pass)."""
        offset = self._clock.wall_offset_ms()
        if offset is None:
            return
        self._gauge.set(offset / 1000)
        if abs(offset) >= CLOCK_WARN_MS and now >= self._next_warning:
            self._next_warning = now + WARN_EVERY_S
            self._log.warning(
                "wall_clock_off",
                offset_s=round(offset / 1000, 1),
                effect="none on decisions (they use the cluster clock in the log)",
                fix="check this host's NTP, unless every peer reports it (catching up)",
            )
