"""The cluster clock: one step-proof time, carried in the log, for every time-based decision
(issue #24; the argument is in docs/reliability.md, "Time").

Why not each peer's wall clock: request-id expiry, retention, per-record TTL and transaction
timeouts decide what is kept, deduplicated or refused. Judged by a host's wall clock, an NTP
step, a VM migration or a host booted with a wrong clock duplicated retried updates, expired
minutes-old records and refused every update. So:

* **In the log.** The leader stamps cluster time into entries: topic entries carry it as their
  append time (``raftlog.topics.records``), and a *time checkpoint* -- a CHECKPOINT entry whose data
  is the MessagePack uint64 of the time in ms instead of the nil byte -- carries it where no
  topic entry does. Reference peers store CHECKPOINT entries verbatim and clients skip them,
  so the stamp is invisible to them. The *log clock* at index ``i`` is the largest stamp at or
  below ``i`` (``TopicStateMachine.last_time``): the same log gives the same value on every
  peer, and it never goes back.
* **Step-proof.** :class:`ClusterClock` is the value a peer would stamp now: it starts from the
  log clock it has applied, advances by *monotonic* elapsed time, and approaches the wall
  clock only with a bounded slew (``SLEW``: at most 10% faster or slower than real time). A
  wall step of any size, in any direction, moves it by at most ``SLEW`` times the time the
  step lasted; it never goes back. A new leader continues from the log clock it has applied
  plus the monotonic time since it applied it.
* **Bootstrap.** A log that has never been stamped has no time: the first leader starts from
  its wall clock, once.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Final

from raftlog.entry import decode_time_checkpoint, encode_time_checkpoint

__all__ = ["SLEW", "ClusterClock", "decode_time_checkpoint", "encode_time_checkpoint", "wall_ms"]

SLEW: Final = 0.1
"""How much faster or slower than real time the cluster clock may run while it approaches
the wall clock (10%)."""


def wall_ms() -> int:
    """This host's wall clock in ms: only ever *approached* by the cluster clock, and shown
    to operators as the peer's clock offset."""
    return time.time_ns() // 1_000_000


class ClusterClock:
    """What this peer would stamp as cluster time now (see the module docstring).

    ``floor`` reads the log clock this peer has applied: whenever it is ahead of the
    extrapolated value (another leader stamped it), the clock restarts from it, so a peer that
    becomes leader continues from the log. ``wall`` and ``mono`` are injectable for tests.
    """

    def __init__(
        self,
        floor: Callable[[], int],
        *,
        wall: Callable[[], int] = wall_ms,
        mono: Callable[[], float] = time.monotonic,
        slew: float = SLEW,
    ) -> None:
        if not 0.0 <= slew < 1.0:
            raise ValueError("slew must be within [0, 1)")
        self._floor = floor
        self._wall = wall
        self._mono = mono
        self._slew = slew
        self._value: float | None = None
        self._at = mono()
        self._wall_read = 0
        """The wall clock as the last advance read it (``now_and_latest`` reuses it)."""

    def _advance(self, *, bootstrap: bool) -> float | None:
        # Written for the publish path (issue #28: it runs once per proposal): branches in
        # place of min/max calls, and the host's wall clock read without the wall_ms frame.
        mono = self._mono()
        elapsed = (mono - self._at) * 1000.0
        elapsed = max(elapsed, 0.0)
        self._at = mono
        value = self._value
        wall = self._wall_read = (
            time.time_ns() // 1_000_000 if self._wall is wall_ms else self._wall()
        )
        if value is not None:
            ahead = value + elapsed
            bound = self._slew * elapsed
            step = wall - ahead
            if step > bound:
                step = bound
            elif step < -bound:
                step = -bound
            value = ahead + step
        floor = self._floor()
        if floor > 0 and (value is None or floor > value):
            value = float(floor)  # the log says later: continue from it
        if value is None and bootstrap:
            value = float(wall)  # a log never stamped: the first leader's wall clock, once
        self._value = value
        return value

    def now(self) -> int:
        """Cluster time in ms for a decision or a stamp (bootstraps an unstamped log)."""
        value = self._advance(bootstrap=True)
        assert value is not None
        return int(value)

    def peek(self) -> int | None:
        """Cluster time as far as this peer knows it, without bootstrapping (None: the log
        holds no time yet); for metrics and status."""
        value = self._advance(bootstrap=False)
        return None if value is None else int(value)

    def wall_offset_ms(self) -> int | None:
        """This host's wall clock minus the cluster clock (None before any time is known):
        what an operator watches to see a host whose clock is off."""
        value = self.peek()
        return None if value is None else self._wall() - value

    def latest_ms(self) -> int:
        """The later of cluster time and this host's wall clock: only for the *future* edge
        of request-id acceptance, which bounds how long an id is remembered and nothing
        else (docs/protocol.md §3.1)."""
        return max(self.now(), self._wall())

    def now_and_latest(self) -> tuple[int, int]:
        """``(now(), latest_ms())`` from one reading of the clocks: what the leader asks for
        every proposal. Reading them once, not twice, halves the clock work on the publish
        path (issue #28: two advances per update cost ~3 µs of the leader's CPU)."""
        value = self._advance(bootstrap=True)
        assert value is not None
        now, wall = int(value), self._wall_read
        return now, now if now >= wall else wall
