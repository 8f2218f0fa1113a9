"""Fixtures: ``stores`` runs a test once per implementation (memory, rocks)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from storage_helpers import MemoryStores, RocksStores, Stores


@pytest.fixture(params=["memory", "rocks"])
def stores(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Stores]:
    made: Stores = MemoryStores() if request.param == "memory" else RocksStores(tmp_path / "peer")
    yield made
    made.close()
