"""How long the peer's loop is held up, and what the peer does about the guard events.

Both exist for issue #12: a pass of the consensus loop that runs longer than a fraction of the
election timeout starves heartbeats and elections (finding 4), and the core's guard events
(a message with an out-of-range term, a peer at the term ceiling, a removed peer) need a
counted, sparing log line each -- kept here so the driver (``node``) stays small.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from raftlog.consensus import (
    CampaignRefused,
    Event,
    FollowerLostEntries,
    MessageDropped,
    RemovedFromCluster,
)
from raftlog.metrics import PeerMetrics
from raftlog.server.interfaces import EventLog
from raftlog.server.stall_watch import GcPauses, StallWatchdog

STALL_LOG_SAMPLE: Final = 10
"""Log one in this many loop stalls above the warning threshold (all are counted)."""
GUARD_LOG_SAMPLE: Final = 100
"""Log one in this many dropped out-of-range messages / refused campaigns (all counted)."""


class LoopStallMeter:
    """Times each pass of the loop: every pass goes into ``raftlog_loop_pass_seconds``, the
    longest is kept (``max_ms``, also the gauge ``raftlog_max_loop_stall_seconds``), passes
    over ``warn_ms`` are counted (``raftlog_loop_stalls``) and a sample of them is logged,
    split into phases: a slow fsync shows as ``ready_ms``, a host too busy to schedule the
    peer in whichever phase it struck, the garbage collector as ``gc_ms``.

    It also keeps the longest *gap* between the starts of two passes (``max_gap_ms``): the
    poll waits a tick at most, so a gap far above pass + tick is time the peer was not run
    at all (a starved CPU, SIGSTOP) -- invisible in the pass times, and just as fatal to
    heartbeats. Gaps over twice ``warn_ms`` are counted and a sample logged (``loop_late``).
    With ``RAFTLOG_STALL_STACKS_MS`` set, a ``StallWatchdog`` logs where a long pass is."""

    def __init__(
        self, warn_ms: float, metrics: PeerMetrics, log: EventLog, clock: Callable[[], float]
    ) -> None:
        self.max_ms = 0.0
        self.max_gap_ms = 0.0
        self.late_passes = 0
        self._warn_ms = warn_ms
        self._passes = metrics.loop_pass_seconds.labels()
        self._max = metrics.max_loop_stall_seconds.labels()
        self._stalls = metrics.loop_stalls.labels()
        self._log = log
        self._clock = clock
        self._started = clock()
        self._previous_start: float | None = None
        self._previous_ms = 0.0
        self._in_pass = False
        self.gc = GcPauses(clock)
        self.gc.install()
        self._watchdog = StallWatchdog.from_env(self._pass_in_progress, log, clock)

    def _pass_in_progress(self) -> float | None:
        return self._started if self._in_pass else None

    def start(self) -> None:
        """The loop woke up from its poll: a pass begins."""
        now = self._clock()
        self._started = now
        self._in_pass = True
        previous = self._previous_start
        self._previous_start = now
        if previous is None:
            if self._watchdog is not None:
                self._watchdog.start()  # from the loop thread: its stack is the one watched
            return
        gap_ms = round((now - previous) * 1000.0, 1)
        self.max_gap_ms = max(self.max_gap_ms, gap_ms)
        if gap_ms >= 2 * self._warn_ms:
            self.late_passes += 1
            if self.late_passes % STALL_LOG_SAMPLE == 1:
                self._log.warning(
                    "loop_late",
                    gap_ms=gap_ms,
                    previous_pass_ms=self._previous_ms,
                    max_gap_ms=self.max_gap_ms,
                    count=self.late_passes,
                )

    def summary(self) -> dict[str, float | int]:
        """For the ``peer_stopping`` line: the longest pass, gap and collection."""
        return {
            "max_loop_stall_ms": self.max_ms,
            "max_loop_gap_ms": self.max_gap_ms,
            "late_loop_passes": self.late_passes,
            "max_gc_pause_ms": self.gc.max_ms,
            "max_gc_generation": self.gc.max_generation,
            "gc_collections": self.gc.collections,
        }

    def close(self) -> None:
        """Stop the watchdog and the collection timing (the loop has ended)."""
        if self._watchdog is not None:
            self._watchdog.stop()
        self.gc.uninstall()

    def finish(self, drained: float, readied: float, streamed: float) -> None:
        """The pass ends now; the arguments are the clock when each phase ended (socket
        drain, ticks and timers, Readies) -- RequestEntries streaming runs until now."""
        end = self._clock()
        self._in_pass = False
        started = self._started
        seconds = end - started
        self._passes.observe(seconds)
        ms = round(seconds * 1000.0, 1)
        self._previous_ms = ms
        gc_ms = self.gc.take_pass_ms()
        if ms > self.max_ms:
            self.max_ms = ms
            self._max.set(seconds)
        if ms < self._warn_ms:
            return
        count = self._stalls.inc()
        if count % STALL_LOG_SAMPLE == 1:
            self._log.warning(
                "loop_stall",
                ms=ms,
                drain_ms=round((drained - started) * 1000.0, 1),
                timers_ms=round((readied - drained) * 1000.0, 1),
                ready_ms=round((streamed - readied) * 1000.0, 1),
                entries_ms=round((end - streamed) * 1000.0, 1),
                gc_ms=gc_ms,
                max_ms=self.max_ms,
                count=count,
            )


def react_to_guard_event(
    event: Event,
    *,
    metrics: PeerMetrics,
    log: EventLog,
    exit_when_removed: bool,
    stop: Callable[[], None],
) -> None:
    """Count and log a guard event; a removed peer stops unless it was told to stay."""
    if isinstance(event, MessageDropped):
        count = metrics.messages_dropped.labels(reason=event.reason).inc()
        if count % GUARD_LOG_SAMPLE == 1:
            log.warning(
                event.reason, sender=event.sender[:64], type=event.message_type, count=count
            )
    elif isinstance(event, CampaignRefused):
        count = metrics.campaigns_refused.inc()
        if count % GUARD_LOG_SAMPLE == 1:
            log.warning(
                "campaign_refused",
                term=event.term,
                reason=event.reason,
                count=count,
                fix="raftlog-tool reset-term (docs/peer-service.md)",
            )
    elif isinstance(event, FollowerLostEntries):
        log.warning(
            "follower_lost_entries",
            peer=event.peer_id,
            acknowledged=event.acknowledged,
            last_index=event.last_index,
            action="resending from its last index (a snapshot when compacted)",
        )
    elif isinstance(event, RemovedFromCluster):
        log.warning("removed_from_cluster", config_index=event.index, exiting=exit_when_removed)
        if exit_when_removed:
            stop()
