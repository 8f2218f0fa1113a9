"""Fixtures for the client integration tests: real ``raftlog-peer`` clusters on loopback.

The clusters come from the shared harness (:mod:`integration.cluster`), which writes a TOML
with free ports into a temp dir, logs each peer to ``<dir>/<id>.log`` and always stops every
process it started. Non-destructive tests share one cluster per module; tests that kill
peers get their own.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from integration.cluster import PeerCluster
from raftlog.client import IndexedEntry, RaftClient, SnapshotChunk


def _started(directory: Path, raft: dict[str, Any] | None = None) -> PeerCluster:
    cluster = PeerCluster(directory, ident="raftlog-client-test", raft=raft)
    try:
        cluster.start()
        cluster.wait_stable_leader()
    except BaseException:
        _stop(cluster)
        raise
    return cluster


def started_cluster(directory: Path, raft: dict[str, Any] | None = None) -> PeerCluster:
    """Start a cluster with extra ``[raft]`` options; the caller must ``stop_cluster`` it."""
    return _started(directory, raft)


def stop_cluster(cluster: PeerCluster) -> None:
    """Stop every peer of ``cluster`` (SIGTERM, then SIGKILL)."""
    _stop(cluster)


def _stop(cluster: PeerCluster) -> None:
    try:
        cluster.stop()  # SIGTERM, then SIGKILL after 10 s
    finally:
        for peer in cluster.peers.values():
            if peer.process is not None and peer.process.poll() is None:
                peer.process.kill()
                peer.process.wait(10)


@pytest.fixture(scope="module")
def shared_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PeerCluster]:
    """One started 3-peer cluster for the non-destructive tests of a module."""
    cluster = _started(tmp_path_factory.mktemp("cluster"))
    try:
        yield cluster
    finally:
        _stop(cluster)


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[PeerCluster]:
    """A started 3-peer cluster of the test's own (for tests that kill peers)."""
    started = _started(tmp_path)
    try:
        yield started
    finally:
        _stop(started)


def client_for(cluster: PeerCluster, *, timeout: float = 10.0) -> RaftClient:
    """A client seeded with every peer URL of ``cluster``."""
    return RaftClient(cluster.urls, cluster.ident, timeout=timeout)


async def read_log(client: RaftClient, prev_index: int = 0) -> list[IndexedEntry]:
    """Every entry after ``prev_index`` (fails on snapshot chunks: use a non-compacting
    cluster), checking that indexes are contiguous."""
    out: list[IndexedEntry] = []
    async for item in client.request_entries(prev_index, timeout=20.0):
        assert not isinstance(item, SnapshotChunk)
        assert item.index == (out[-1].index if out else prev_index) + 1
        out.append(item)
    return out
