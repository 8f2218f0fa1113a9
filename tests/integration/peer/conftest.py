"""The peer tests' clusters: ``cluster``, a started three-peer cluster of the test's own (for
tests that kill, stop or reconfigure peers), and ``shared_cluster``, one for a module's tests
that only read and write (it starts the same way)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from integration.cluster import PeerCluster, module_cluster


def started(directory: Path) -> PeerCluster:
    """A three-peer cluster in ``directory``, running, with an elected leader."""
    cluster = PeerCluster(directory)
    try:
        cluster.start()
        cluster.wait_leader()
    except BaseException:
        cluster.stop()
        raise
    return cluster


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[PeerCluster]:
    """A started three-peer cluster with an elected leader; stopped whatever happens."""
    with started(tmp_path) as c:
        yield c


shared_cluster = module_cluster(started, "peer")
