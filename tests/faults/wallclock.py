"""Wall-clock faults for real peers (issue #24): each peer's wall clock can be stepped while it
runs; its monotonic clock is untouched, as with NTP (the mechanism: ``wallclock_shim``)."""

from __future__ import annotations

import os
from pathlib import Path

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
