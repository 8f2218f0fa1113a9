from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from integration.cluster import PeerCluster


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[PeerCluster]:
    """A started three-peer cluster with an elected leader; stopped whatever happens."""
    with PeerCluster(tmp_path) as c:
        c.start()
        c.wait_leader()
        yield c
