"""Wall-clock faults for real peers (issue #24): each peer's wall clock can be stepped while it
runs; its monotonic clock is untouched, as with NTP (the mechanism: ``wallclock_shim``)."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

from integration.cluster import wait_for

from raftlog.client import RaftClient
from raftlog.rpc.clock import ask_clock

SHIM_DIR = Path(__file__).parent / "wallclock_shim"
HOUR = 3600.0


class WallClocks:
    """One offset file per peer under ``directory``; ``env(peer_id)`` goes into the peer's
    environment before it starts, ``step(peer_id, seconds)`` sets its offset at run time."""

    def __init__(self, directory: Path) -> None:
        self._dir = directory / "wallclocks"
        self._dir.mkdir(parents=True, exist_ok=True)

    def _file(self, peer_id: str) -> Path:
        return self._dir / f"{peer_id}.offset"

    def env(self, peer_id: str) -> dict[str, str]:
        """What a peer needs in its environment to have a steppable wall clock."""
        self.step(peer_id, 0.0)
        path = os.pathsep.join(p for p in (str(SHIM_DIR), os.environ.get("PYTHONPATH")) if p)
        return {"PYTHONPATH": path, "RAFTLOG_TEST_WALL_OFFSET_FILE": str(self._file(peer_id))}

    def step(self, peer_id: str, seconds: float) -> None:
        """From now on ``peer_id``'s wall clock reads true time + ``seconds`` (atomically)."""
        target = self._file(peer_id)
        tmp = target.with_suffix(".tmp")
        tmp.write_text(f"{seconds}\n", encoding="ascii")
        tmp.replace(target)


def observed_offset(urls: list[str], ident: str, url: str) -> float | None:
    """The wall-clock offset (seconds) the peer at ``url`` really runs with, from its ``CK``
    answer, or None when it does not answer."""

    async def ask() -> float | None:
        async with RaftClient(urls, ident, timeout=5.0) as client:
            reading = await ask_clock(client, url, 5.0)
        return None if reading is None else reading.wall_ms / 1000 - time.time()

    return asyncio.run(ask())


def require_offset(urls: list[str], ident: str, url: str, seconds: float) -> None:
    """Fail unless the peer at ``url`` reports a wall clock ``seconds`` off (within a minute):
    a shim that did not load (a Python started with ``-S`` or ``-I``) must not let a clock
    test pass without its fault."""
    seen: list[float | None] = []

    def stepped() -> bool:
        seen.append(observed_offset(urls, ident, url))
        return seen[-1] is not None and abs(seen[-1] - seconds) < 60

    wait_for(f"the peer at {url} to run {seconds:+.0f} s off (saw {seen[-1:]})", stepped, 10)
