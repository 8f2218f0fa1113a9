"""The HTTP app (aiohttp test server, no peer) and the Prometheus collector's output."""

from __future__ import annotations

import asyncio
import os
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer
from prometheus_client.parser import text_string_to_metric_families

from raftlog.metrics import PeerMetrics
from raftlog.observability import health
from raftlog.observability.http import build_app
from raftlog.observability.view import MemberView, PeerView, ViewBox
from raftlog.security.quotas import Quota


def _leader_view() -> PeerView:
    return PeerView(
        peer_id="1",
        role="leader",
        term=3,
        leader_id="1",
        commit_index=90,
        applied_index=90,
        first_index=1,
        last_index=100,
        config_index=1,
        config_joint=False,
        members=(
            MemberView("1", "tcp://a:1", "new", 100),
            MemberView("2", "tcp://a:2", "new", 100),
            MemberView("3", "tcp://a:3", "new", 60),
        ),
        pending_updates=4,
        open_entries_streams=1,
        topics=2,
        topic_stats=(("audit", 3, 30, 5, 50, 2, 20), ("orders", 1, 10, 1, 10, 0, 0)),
        kv_stats=(("config", 4, 64),),
        published_at=time.monotonic(),
    )


async def _client(views: ViewBox, metrics: PeerMetrics, data_dir: Path,
                  **options: Any) -> TestClient:
    client = TestClient(TestServer(build_app(views, metrics.registry, data_dir, ready_max_lag=5,
                                             **options)))
    await client.start_server()
    return client


async def test_metrics_are_prometheus_text_with_conventional_names(tmp_path: Path) -> None:
    views, metrics = ViewBox(), PeerMetrics()
    views.publish(_leader_view())
    metrics.messages_dropped.labels(reason="malformed").inc(3)
    metrics.fsync_seconds.observe(0.004)
    metrics.fsync_batch_entries.observe(17)
    metrics.elections_won.inc()
    metrics.snapshot_transfers.labels(direction="sent").inc()
    metrics.snapshot_transfer_seconds.labels(direction="sent").observe(0.3)
    metrics.client_connections.set(2)
    metrics.client_connects.inc(2)
    client = await _client(views, metrics, tmp_path)
    try:
        response = await client.get("/metrics")
        assert response.status == 200
        assert response.headers["Content-Type"].startswith("text/plain")
        text = await response.text()
    finally:
        await client.close()
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }
    assert samples[("raftlog_messages_dropped_total", (("reason", "malformed"),))] == 3
    assert samples[("raftlog_elections_won_total", ())] == 1
    assert samples[("raftlog_fsync_duration_seconds_bucket", (("le", "0.005"),))] == 1
    assert samples[("raftlog_fsync_duration_seconds_count", ())] == 1
    assert samples[("raftlog_fsync_batch_entries_bucket", (("le", "16.0"),))] == 0
    assert samples[("raftlog_fsync_batch_entries_bucket", (("le", "32.0"),))] == 1
    assert samples[("raftlog_role", (("role", "leader"),))] == 1
    assert samples[("raftlog_role", (("role", "follower"),))] == 0
    assert samples[("raftlog_term", ())] == 3
    assert samples[("raftlog_leader", (("leader_id", "1"),))] == 1
    assert samples[("raftlog_commit_index", ())] == 90
    assert samples[("raftlog_follower_lag_entries", (("peer_id", "3"),))] == 40
    assert samples[("raftlog_follower_match_index", (("peer_id", "2"),))] == 100
    audit = (("topic", "audit"),)
    assert samples[("raftlog_topic_records", audit)] == 3
    assert samples[("raftlog_topic_bytes", audit)] == 30
    assert samples[("raftlog_topic_records_published_total", audit)] == 5
    assert samples[("raftlog_topic_bytes_published_total", audit)] == 50
    assert samples[("raftlog_topic_records_expired_total", audit)] == 2
    assert samples[("raftlog_topic_bytes_expired_total", audit)] == 20
    assert samples[("raftlog_topic_records", (("topic", "orders"),))] == 1
    assert samples[("raftlog_kv_live_keys", (("topic", "config"),))] == 4  # issue #29
    assert samples[("raftlog_kv_live_bytes", (("topic", "config"),))] == 64
    assert samples[("raftlog_snapshot_transfers_total", (("direction", "sent"),))] == 1
    assert (
        samples[("raftlog_snapshot_transfer_duration_seconds_count", (("direction", "sent"),))] == 1
    )
    assert samples[("raftlog_client_connections", ())] == 2
    assert samples[("raftlog_client_connects_total", ())] == 2


async def test_health_and_readiness_answer_json_with_status(tmp_path: Path) -> None:
    views = ViewBox()
    client = await _client(views, PeerMetrics(), tmp_path)
    try:
        response = await client.get("/healthz")
        assert response.status == 503  # nothing published yet
        assert "not published" in (await response.json())["reason"]
        views.publish(_leader_view())
        response = await client.get("/healthz")
        assert (response.status, (await response.json())["ok"]) == (200, True)
        response = await client.get("/readyz")
        assert response.status == 200
        assert "leader 1" in (await response.json())["reason"]
        views.publish(replace(_leader_view(), applied_index=80))  # 10 behind, limit 5
        response = await client.get("/readyz")
        assert response.status == 503
        response = await client.get("/readyz?max_lag=20")
        assert response.status == 200
        response = await client.get("/readyz?max_lag=lots")
        assert response.status == 503
        assert "max_lag" in (await response.json())["reason"]
    finally:
        await client.close()


async def test_healthz_fails_when_storage_is_gone(tmp_path: Path) -> None:
    views = ViewBox()
    views.publish(_leader_view())
    client = await _client(views, PeerMetrics(), tmp_path / "missing")
    try:
        response = await client.get("/healthz")
        assert response.status == 503
        assert "storage" in (await response.json())["reason"]
    finally:
        await client.close()


async def test_a_healthz_hammer_costs_one_disk_probe_a_second(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue #25 finding 6: every /healthz made a synced write (16,636 calls in 15 s cost a
    peer 4.6 s of CPU); now the probe's verdict is shared for a second."""
    synced: list[int] = []
    real_fsync = os.fsync
    monkeypatch.setattr(health.os, "fsync", lambda fd: (synced.append(fd), real_fsync(fd)))
    views = ViewBox()
    views.publish(_leader_view())
    client = await _client(views, PeerMetrics(), tmp_path, healthz_rate=None)  # probes only
    try:
        answers = await asyncio.gather(*(client.get("/healthz") for _ in range(200)))
        assert {a.status for a in answers} == {200}
        for _ in range(100):
            assert (await client.get("/healthz")).status == 200
        assert len(synced) <= 2  # one probe, maybe a second one if a second passed
    finally:
        await client.close()


async def test_a_healthz_hammer_from_one_address_gets_429_with_retry_after(
    tmp_path: Path,
) -> None:
    """Issue #25: /healthz is rate-limited per source address; past the burst a prober gets
    429 and Retry-After at once, and a probe at an orchestrator's pace is answered again."""
    views = ViewBox()
    views.publish(_leader_view())
    rate = Quota(records_per_s=1.0, records_burst=5.0)
    client = await _client(views, PeerMetrics(), tmp_path, healthz_rate=rate)
    try:
        started = time.monotonic()
        statuses = [(await client.get("/healthz")).status for _ in range(8)]
        refilled = int(time.monotonic() - started)  # 1/s: what came back meanwhile (a slow CI)
        assert statuses[:5] == [200] * 5
        assert statuses[5:].count(200) <= refilled, statuses
        for _ in range(refilled + 1):  # the bucket is empty after at most this many more
            refused = await client.get("/healthz")
            if refused.status == 429:
                break
        assert refused.status == 429
        assert int(refused.headers["Retry-After"]) >= 1
        assert "too many" in (await refused.json())["reason"]
        await asyncio.sleep(1.1)  # 1/s refills one probe
        assert (await client.get("/healthz")).status == 200
    finally:
        await client.close()


async def test_per_topic_series_can_be_switched_off(tmp_path: Path) -> None:
    views = ViewBox()
    views.publish(_leader_view())
    app = build_app(views, PeerMetrics().registry, tmp_path, ready_max_lag=5,
                    topic_metrics=False)
    client = TestClient(TestServer(app))
    await client.start_server()
    try:
        text = await (await client.get("/metrics")).text()
        assert "raftlog_topics " in text  # the count stays
        assert "orders" not in text and "raftlog_topic_records" not in text
    finally:
        await client.close()
