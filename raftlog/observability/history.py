"""The status page's history: one sample a second of the last ten minutes, kept in the peer.

Why sampled on a timer in the HTTP thread rather than recorded on each publish: the publish
path already counts everything the charts need (the per-topic publish counters of the
published :class:`PeerView`, the ``raftlog_update_latency_seconds`` histogram and
``raftlog_log_entries_applied`` of the metrics registry), so the history costs the consensus
loop nothing. Every ``SAMPLE_INTERVAL`` the listener's event loop reads those counters, turns
the difference with the previous reading into rates and an interval's latency, and appends
one :class:`HistorySample` to a ring of ``HISTORY_SAMPLES`` (``deque(maxlen=...)``): memory is
bounded by the ring's length times a sample's size, a sample carrying at most
``HISTORY_TOPICS`` topic rates and one lag per member (about 1 KiB each at the caps, so
well under 1 MiB for the whole ring; ``tests/unit/observability/test_history.py`` measures it).

Counters that go down (the peer restarted, a topic was deleted and re-created) count from
zero instead of giving a negative rate; the first reading after a start only sets the base.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from raftlog.metrics import Counter, Histogram, Registry
from raftlog.observability.view import PeerView, ViewBox

SAMPLE_INTERVAL: Final = 1.0
"""Seconds between two samples."""
HISTORY_SAMPLES: Final = 600
"""Samples kept: ten minutes at one a second."""
HISTORY_TOPICS: Final = 8
"""Topics whose rate a sample keeps (the busiest of the interval): the charts stay legible
and a sample's size bounded whatever the number of topics."""
LATENCY_METRIC: Final = "raftlog_update_latency_seconds"
APPLIED_METRIC: Final = "raftlog_log_entries_applied"


@dataclass(frozen=True, slots=True)
class HistorySample:
    """One interval's figures (None: nothing to say, e.g. no update committed)."""

    time: float
    """Wall time at the end of the interval (the charts' x axis)."""
    publish_rate: float | None
    """Records/s published to all topics (applied on this peer)."""
    applied_rate: float | None
    """Log entries/s applied on this peer."""
    latency_mean: float | None
    """Seconds from accepting an update to its committed reply, averaged over the interval
    (leader only: followers commit no client updates)."""
    latency_p99: float | None
    """The upper bound of the histogram bucket holding the interval's 99th percentile."""
    lag: Mapping[str, int]
    """Entries each member's applied index is behind the cluster's commit index."""
    topics: Mapping[str, float]
    """Records/s of the ``HISTORY_TOPICS`` busiest topics of the interval."""

    def as_json(self) -> dict[str, Any]:
        """The sample as ``/api/history`` serves it."""
        return {
            "t": self.time,  # unrounded: the page passes it back as ?since=
            "publish": self.publish_rate,
            "applied": self.applied_rate,
            "latency_mean": self.latency_mean,
            "latency_p99": self.latency_p99,
            "lag": dict(self.lag),
            "topics": dict(self.topics),
        }


def _gain(now: float, before: float) -> float:
    """What a counter gained; a counter that went down restarted from zero."""
    return now if now < before else now - before


@dataclass(frozen=True, slots=True)
class _Reading:
    """The counters at one instant."""

    at: float
    topics: Mapping[str, int]
    applied: float
    latency_count: int
    latency_sum: float
    latency_buckets: tuple[int, ...]


class HistoryRing:
    """The bounded ring of samples and the arithmetic from one reading to the next."""

    def __init__(self, capacity: int = HISTORY_SAMPLES) -> None:
        self.samples: deque[HistorySample] = deque(maxlen=capacity)
        self._last: _Reading | None = None
        self._bounds: tuple[float, ...] = ()

    def observe(
        self,
        at: float,
        wall: float,
        *,
        topics: Mapping[str, int],
        applied: float,
        latency: tuple[int, float, tuple[int, ...]],
        lag: Mapping[str, int],
        bounds: tuple[float, ...] = (),
    ) -> HistorySample | None:
        """Take one reading (``at`` monotonic seconds; ``latency`` = count, sum, buckets of
        the latency histogram with ``bounds``); append and return the sample of the
        interval since the previous reading (None for the first, or a clock that did not
        move)."""
        count, total, buckets = latency
        reading = _Reading(at, dict(topics), applied, count, total, tuple(buckets))
        last, self._last, self._bounds = self._last, reading, bounds
        if last is None or at <= last.at:
            return None
        span = at - last.at
        rates = {
            name: _gain(value, last.topics.get(name, 0)) / span for name, value in topics.items()
        }
        busiest = sorted(rates.items(), key=lambda kv: (-kv[1], kv[0]))[:HISTORY_TOPICS]
        mean, p99 = self._latency(last, reading)
        sample = HistorySample(
            time=wall,
            publish_rate=sum(rates.values()),
            applied_rate=_gain(applied, last.applied) / span,
            latency_mean=mean,
            latency_p99=p99,
            lag=dict(lag),
            topics=dict(busiest),
        )
        self.samples.append(sample)
        return sample

    def _latency(self, last: _Reading, now: _Reading) -> tuple[float | None, float | None]:
        restarted = now.latency_count < last.latency_count
        count = now.latency_count - (0 if restarted else last.latency_count)
        if count <= 0:
            return None, None
        total = now.latency_sum - (0.0 if restarted else last.latency_sum)
        if restarted or len(last.latency_buckets) != len(now.latency_buckets):
            gained = list(now.latency_buckets)
        else:
            gained = [a - b for a, b in zip(now.latency_buckets, last.latency_buckets, strict=True)]
        wanted, running, p99 = 0.99 * count, 0, None
        for bound, n in zip((*self._bounds, float("inf")), gained, strict=False):
            running += n
            if running >= wanted:
                p99 = bound if bound != float("inf") else None
                break
        if p99 is None and self._bounds:  # beyond the last bucket: say the last bound
            p99 = self._bounds[-1]
        return total / count, p99

    def since(self, t: float) -> list[HistorySample]:
        """The samples newer than wall time ``t`` (all with ``t`` = 0), oldest first."""
        return [s for s in self.samples if s.time > t]


class HistorySampler:
    """Feeds a :class:`HistoryRing` every ``interval`` seconds from the latest view, the
    registry and ``lags`` (the cluster poller's per-member lag)."""

    def __init__(
        self,
        views: ViewBox,
        registry: Registry,
        lags: Callable[[PeerView], Mapping[str, int]],
        *,
        ring: HistoryRing | None = None,
        interval: float = SAMPLE_INTERVAL,
    ) -> None:
        self.ring = ring if ring is not None else HistoryRing()
        self.interval = interval
        self._views = views
        self._lags = lags
        families = {family.name: family for family in registry.collect()}
        latency = families.get(LATENCY_METRIC)
        applied = families.get(APPLIED_METRIC)
        self._latency = latency if isinstance(latency, Histogram) else None
        self._applied = applied if isinstance(applied, Counter) else None

    def sample(self) -> HistorySample | None:
        """Read the counters now and append the interval's sample (None: no view yet, or
        the first reading)."""
        view = self._views.latest()
        if view is None:
            return None
        count, total, buckets = 0, 0.0, []
        if self._latency is not None:
            buckets = [0] * (len(self._latency.bounds) + 1)
            for _, child in list(self._latency.series()):
                count += child.count
                total += child.sum
                buckets = [a + b for a, b in zip(buckets, list(child.buckets), strict=True)]
        applied = 0.0
        if self._applied is not None:
            applied = sum(child.value for _, child in list(self._applied.series()))
        return self.ring.observe(
            time.monotonic(),
            time.time(),
            topics={stat[0]: stat[3] for stat in view.topic_stats},
            applied=applied,
            latency=(count, total, tuple(buckets)),
            lag=self._lags(view),
            bounds=self._latency.bounds if self._latency is not None else (),
        )

    async def run(self) -> None:
        """Sample until cancelled (the listener cancels it when it stops)."""
        while True:
            # the loop thread may add a labelled child while we iterate ("dictionary
            # changed size"): skip that second rather than end the history
            with contextlib.suppress(RuntimeError):
                self.sample()
            await asyncio.sleep(self.interval)

    def as_json(self, since: float = 0.0) -> dict[str, Any]:
        """``/api/history``'s body: the ring's shape and the samples newer than ``since``."""
        return {
            "interval": self.interval,
            "capacity": self.ring.samples.maxlen,
            "samples": [s.as_json() for s in self.ring.since(since)],
        }
