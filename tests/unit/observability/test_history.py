"""The status page's history: the bounded ring, rates from counters, ``/api/history`` and
the static chart library."""

from __future__ import annotations

import asyncio
import time
import tracemalloc
from dataclasses import replace
from pathlib import Path

import pytest
from aiohttp.test_utils import TestClient, TestServer

from raftlog.metrics import PeerMetrics
from raftlog.observability.cluster_poll import ClusterPoller
from raftlog.observability.history import (
    HISTORY_SAMPLES,
    HISTORY_TOPICS,
    HistoryRing,
    HistorySampler,
)
from raftlog.observability.http import PROTECTED, build_app
from raftlog.observability.view import MemberView, PeerView, ViewBox

NO_LATENCY = (0, 0.0, ())


def _view(stats: tuple[tuple[str, int], ...] = ()) -> PeerView:
    return PeerView(
        peer_id="1", role="leader", term=2, leader_id="1", commit_index=10,
        applied_index=10, first_index=1, last_index=10, config_index=0, config_joint=False,
        members=(MemberView("1", "tcp://a:1", "new", 10),), pending_updates=0,
        open_entries_streams=0, topics=len(stats),
        topic_stats=tuple((name, n, n, n, n, 0, 0) for name, n in stats),
    )


def _observe(ring: HistoryRing, at: float, topics: dict[str, int], applied: float = 0.0,
             latency: tuple[int, float, tuple[int, ...]] = NO_LATENCY,
             bounds: tuple[float, ...] = ()) -> object:
    return ring.observe(at, 1000.0 + at, topics=topics, applied=applied, latency=latency,
                        lag={"2": int(at)}, bounds=bounds)


def test_rates_are_counter_differences_over_the_interval() -> None:
    ring = HistoryRing()
    assert _observe(ring, 10.0, {"orders": 100, "audit": 5}, applied=50) is None  # the base
    sample = _observe(ring, 12.0, {"orders": 160, "audit": 5, "new": 4}, applied=70)
    assert sample is not None and sample is ring.samples[-1]
    assert sample.topics == {"orders": 30.0, "new": 2.0, "audit": 0.0}
    assert sample.publish_rate == 32.0
    assert sample.applied_rate == 10.0
    assert sample.latency_mean is None and sample.latency_p99 is None  # nothing committed
    assert sample.lag == {"2": 12}
    assert sample.time == 1012.0


def test_latency_is_the_intervals_mean_and_p99_bucket() -> None:
    ring = HistoryRing()
    bounds = (0.001, 0.01, 0.1)
    _observe(ring, 1.0, {}, latency=(10, 1.0, (0, 0, 10, 0)), bounds=bounds)
    # 100 more updates: 98 under 1 ms, 2 in (0.01, 0.1]; their sum 0.3 s
    sample = _observe(ring, 2.0, {}, latency=(110, 1.3, (98, 0, 12, 0)), bounds=bounds)
    assert sample is not None
    assert sample.latency_mean == pytest.approx(0.003)
    assert sample.latency_p99 == 0.1
    sample = _observe(ring, 3.0, {}, latency=(210, 1.4, (198, 0, 12, 0)), bounds=bounds)
    assert sample is not None and sample.latency_p99 == 0.001


def test_counters_that_restart_count_from_zero_never_negative() -> None:
    """A restarted peer or a re-created topic: its counters start again from zero."""
    ring = HistoryRing()
    _observe(ring, 0.0, {"orders": 1000}, applied=900, latency=(50, 5.0, (50,)))
    sample = _observe(ring, 1.0, {"orders": 7}, applied=3, latency=(2, 0.4, (2,)))
    assert sample is not None
    assert sample.topics == {"orders": 7.0} and sample.applied_rate == 3.0
    assert sample.latency_mean == pytest.approx(0.2)
    # a clock that did not move gives no sample (no division by zero)
    assert _observe(ring, 1.0, {"orders": 9}) is None
    assert len(ring.samples) == 1


def test_the_ring_is_bounded_in_samples_topics_and_memory() -> None:
    ring = HistoryRing()
    topics = {f"topic-{i:03}": 0 for i in range(200)}
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for second in range(HISTORY_SAMPLES * 2):
            topics = {name: n + second * (i + 1) for i, (name, n) in enumerate(topics.items())}
            _observe(ring, float(second), topics, latency=(second, second * 0.01, (second,)),
                     bounds=())
        used = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert len(ring.samples) == HISTORY_SAMPLES
    assert all(len(s.topics) == HISTORY_TOPICS for s in ring.samples)
    assert set(ring.samples[-1].topics) == {f"topic-{i:03}" for i in range(192, 200)}
    assert ring.samples[0].time == 1000.0 + HISTORY_SAMPLES  # the oldest went first
    assert used < 1 << 20, f"the ring took {used} bytes"


def test_the_sampler_reads_the_view_and_the_registry() -> None:
    views, metrics = ViewBox(), PeerMetrics()
    sampler = HistorySampler(views, metrics.registry, lambda view: {"1": 0, "2": 3})
    assert sampler.sample() is None  # no view yet
    views.publish(_view((("orders", 10),)))
    assert sampler.sample() is None  # the base reading
    time.sleep(0.01)
    views.publish(_view((("orders", 30),)))
    metrics.entries_applied.inc(5)
    metrics.update_latency_seconds.observe(0.002)
    metrics.update_latency_seconds.observe(0.004)
    sample = sampler.sample()
    assert sample is not None
    assert sample.topics["orders"] > 0 and sample.publish_rate == sample.topics["orders"]
    assert sample.applied_rate is not None and sample.applied_rate > 0
    assert sample.latency_mean == pytest.approx(0.003)
    assert sample.latency_p99 is not None and sample.latency_p99 >= 0.004
    assert sample.lag == {"1": 0, "2": 3}


async def test_api_history_serves_samples_since_and_static_files(tmp_path: Path) -> None:
    views, metrics = ViewBox(), PeerMetrics()
    views.publish(_view((("orders", 1),)))
    poller = ClusterPoller(views, "ident")
    app = build_app(views, metrics.registry, tmp_path, ready_max_lag=5, poller=poller)
    client = TestClient(TestServer(app))
    await client.start_server()
    try:
        async def samples(since: str = "0") -> list[dict[str, object]]:
            response = await client.get("/api/history", params={"since": since})
            assert response.status == 200
            body = await response.json()
            assert body["capacity"] == HISTORY_SAMPLES and body["interval"] == 1.0
            return list(body["samples"])

        deadline = time.monotonic() + 30
        got: list[dict[str, object]] = []
        published = 1
        while len(got) < 2 and time.monotonic() < deadline:  # sampled once a second
            published += 5
            views.publish(replace(_view((("orders", published),)), published_at=time.monotonic()))
            await asyncio.sleep(0.2)
            got = await samples()
        assert len(got) >= 2, got
        assert got[-1]["topics"]["orders"] > 0  # type: ignore[index]
        assert got[-1]["lag"] == {"1": 0}
        newer = await samples(repr(got[-1]["t"]))  # the sampler may have added one since
        assert all(s["t"] > got[-1]["t"] for s in newer), newer  # type: ignore[operator]
        assert (await client.get("/api/history", params={"since": "x"})).status == 400

        script = await client.get("/static/uPlot.iife.min.js")
        assert script.status == 200
        assert script.headers["Content-Type"].startswith("application/javascript")
        assert b"uPlot" in await script.read()
        assert (await client.get("/static/uPlot.min.css")).status == 200
        assert (await client.get("/static/..%2Fhttp.py")).status == 404
        assert (await client.get("/static/README.md")).status == 404
        page = await (await client.get("/")).text()
        assert '<script src="/static/uPlot.iife.min.js">' in page
    finally:
        await client.close()
    assert "/api/history" in PROTECTED  # the same token rules as /api/cluster
