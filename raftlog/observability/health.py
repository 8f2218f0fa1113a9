"""The rules behind ``/healthz`` and ``/readyz`` (pure functions of a view and the clock).

- *healthy*: the process runs a live loop (its last view is younger than ``STALE_AFTER``)
  and its storage accepts a synced write. A load balancer or systemd watchdog restarts a
  peer that fails this.
- *ready*: healthy, a member (not CLIENT state), knows a leader, and has applied the
  leader's commit up to ``max_lag`` entries (on a follower: its own commit index, which
  the leader's heartbeats keep current). Traffic should go to a ready peer only.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from raftlog.observability.view import PeerView

STALE_AFTER: Final = 5.0
"""Seconds without a fresh view before the loop counts as stuck (views come every 0.2 s;
one very slow fsync may hold the loop a second or two)."""

DEFAULT_READY_MAX_LAG: Final = 1000
"""Entries a member's applied index may trail the commit index and still take reads."""

PROBE_FILE: Final = ".healthz-probe"


@dataclass(frozen=True, slots=True)
class Verdict:
    """200 or 503 and a one-line reason (the JSON body)."""

    ok: bool
    reason: str

    @property
    def status(self) -> int:
        """The HTTP status for this verdict."""
        return 200 if self.ok else 503


def loop_verdict(view: PeerView | None, now: float | None = None) -> Verdict:
    """Is the consensus loop alive (publishing views)?"""
    if view is None:
        return Verdict(False, "peer loop has not published its state yet")
    age = (time.monotonic() if now is None else now) - view.published_at
    if age > STALE_AFTER:
        return Verdict(False, f"peer loop stuck: last state is {age:.1f}s old")
    return Verdict(True, "ok")


def storage_verdict(data_dir: Path) -> Verdict:
    """Can the data directory take a synced write? (Writes, fsyncs and removes a tiny
    file beside the stores -- the same syscalls a Ready needs, on the same filesystem.)"""
    probe = data_dir / PROBE_FILE
    try:
        fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.write(fd, b"ok")
            os.fsync(fd)
        finally:
            os.close(fd)
        probe.unlink()
    except OSError as exc:
        return Verdict(False, f"storage not writable: {exc.strerror or exc}")
    return Verdict(True, "ok")


def ready_verdict(view: PeerView | None, max_lag: int, now: float | None = None) -> Verdict:
    """Should this peer take traffic (see module docstring)?"""
    alive = loop_verdict(view, now)
    if not alive.ok or view is None:
        return alive
    if view.role == "client":
        return Verdict(False, "not a member of the cluster configuration (CLIENT state)")
    if view.leader_id is None:
        return Verdict(False, f"no known leader in term {view.term}")
    lag = view.commit_index - view.applied_index
    if lag > max_lag:
        return Verdict(False, f"applied index {view.applied_index} is {lag} behind commit")
    return Verdict(True, f"ok: {view.role}, leader {view.leader_id}, term {view.term}")
