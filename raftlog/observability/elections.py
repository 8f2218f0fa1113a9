"""The last leader changes one peer lived through, kept by the peer itself.

Why in the peer and not in whoever watches it: a status page opened after an election (or a
poller that started late) must still show it; the peer sees every change of its own role,
term and known leader (the Ready's soft state) and why a leader stepped down, so it keeps a
small ring of them and publishes it with its view.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from raftlog.consensus import Role

ELECTIONS_KEPT: Final = 20
"""Leader changes a peer remembers (newest first on the page)."""

STEP_DOWN_REASONS: Final = {
    "higher_term": "stepped down: saw a higher term",
    "check_quorum": "stepped down: lost contact with a quorum",
    "removed": "stepped down: removed from the configuration",
}


@dataclass(frozen=True, slots=True)
class LeaderChange:
    """One change: from ``time`` (wall clock) on, ``leader_id`` leads ``term`` as far as
    this peer knows (None: no leader known), and why."""

    time: float
    term: int
    leader_id: str | None
    reason: str


class ElectionLog:
    """Turns the soft-state changes of one peer into :class:`LeaderChange` entries."""

    def __init__(
        self, peer_id: str, keep: int = ELECTIONS_KEPT, clock: Callable[[], float] = time.time
    ) -> None:
        self._peer_id = peer_id
        self._clock = clock
        self._ring: deque[LeaderChange] = deque(maxlen=keep)
        self._last: tuple[int, str | None, Role] | None = None

    def on_soft_state(self, role: Role, leader_id: str | None, term: int) -> None:
        """A Ready's soft state (reported whenever role, leader or term changes)."""
        current = (term, leader_id, role)
        before = self._last
        self._last = current
        if before is not None and before[:2] == current[:2] and role is not Role.CANDIDATE:
            return  # e.g. a follower becoming CLIENT-state: no leader change
        if role is Role.CANDIDATE:
            if before is not None and before == current:
                return
            reason = "election started here (no leader heard within the timeout)"
            self._add(term, None, reason)
        elif role is Role.LEADER:
            self._add(term, self._peer_id, "won the election")
        elif leader_id is not None:
            self._add(term, leader_id, "new leader heard")
        elif before is not None and before[1] == self._peer_id:
            return  # this peer stopped leading: ``on_stepped_down`` says why, once
        elif before is not None and before[1] is not None:
            self._add(
                term, None, f"term {term} began (a peer asked for votes); leader {before[1]} "
                f"of term {before[0]} no longer followed"
            )

    def on_stepped_down(self, term: int, reason: str) -> None:
        """This peer stopped leading (``SteppedDown``: higher_term, check_quorum, removed)."""
        self._add(term, None, STEP_DOWN_REASONS.get(reason, f"stepped down: {reason}"))

    def _add(self, term: int, leader_id: str | None, reason: str) -> None:
        self._ring.appendleft(LeaderChange(self._clock(), term, leader_id, reason))

    def recent(self) -> tuple[LeaderChange, ...]:
        """The remembered changes, newest first: by term, then time (a step-down is
        reported with the term it led, after the higher term that caused it was seen; the
        page must still read in term order -- issue #33 item 7)."""
        return tuple(sorted(self._ring, key=lambda c: (c.term, c.time), reverse=True))
