"""The largest term and log index a raftlog peer ever adopts, persists or creates.

Why a ceiling far below the wire's 2^53-1 (issue #12, finding 1): the wire format (and the
reference, whose numbers are float64) cannot carry integers above 2^53-1. A peer that adopted
a term of exactly 2^53-1 from one forged RequestVote persisted it, then failed to encode its
own next RequestVote (term + 1) and exited -- at every restart, because the term was on disk.
So a peer must never adopt a value it could not itself encode *and increment*.

``MAX_TERM`` and ``MAX_INDEX`` are 2^48-1 (about 2.8e14):

* no real cluster reaches them: an election every millisecond for 8,900 years, or a million
  entries a second for 8.9 years of a single log (raftlog appends far fewer);
* headroom above them up to 2^53-1 is 31 * 2^48, so a peer at the ceiling can still encode
  every message it would send, with any batch size;
* both fit the 7-byte term field of a log entry (``raftlog.entry``).

Enforced in three layers: the codec refuses peer messages that carry a larger term or index
(a counted, logged drop: ``term_out_of_range`` / ``index_out_of_range``), the consensus core
refuses them too (it never trusts its driver) and never increments past the ceiling itself
(a candidate at ``MAX_TERM`` stops campaigning with an event), and a peer that finds a larger
value on disk refuses to start with a one-line error that names the recovery command
(``raftlog-tool reset-term``; see docs/peer-service.md, "Recovering from an out-of-range
term").
"""

from __future__ import annotations

from typing import Final

MAX_TERM: Final = (1 << 48) - 1
"""Largest term a peer adopts, persists or campaigns for."""

MAX_INDEX: Final = (1 << 48) - 1
"""Largest log index a peer accepts from a message or appends to its log."""

TERM_OUT_OF_RANGE: Final = "term_out_of_range"
"""Drop reason (counter and log event name) for a term above ``MAX_TERM``."""

ELECTIONS_RESERVED: Final = 1 << 20
"""Elections that stay possible after any single message, however high its term (issue #24):
terms above ``ADOPT_CEILING`` are adopted only in steps of at most ``TERM_STEP_ABOVE_CEILING``."""

ADOPT_CEILING: Final = MAX_TERM - ELECTIONS_RESERVED
"""Up to here a peer adopts any term a message carries (Raft's rule); above it, only a small
step beyond its own term, so that one forged RequestVote with a term at or near ``MAX_TERM``
(2^48-1, 2^48-2, ...) is dropped instead of using up every election left: a plaintext cluster
was left leaderless for good by one such message per peer."""

TERM_STEP_ABOVE_CEILING: Final = 1 << 10
"""The largest jump above the peer's own term it adopts once terms are above
``ADOPT_CEILING``: legitimate candidates are at most a few terms ahead (the spiral guard and
leader stickiness keep them there), so more than a thousand forged messages would be needed to
use up the reserve."""

INDEX_OUT_OF_RANGE: Final = "index_out_of_range"
"""Drop reason (counter and log event name) for an index above ``MAX_INDEX``."""


def term_in_range(term: int) -> bool:
    """Can a peer adopt ``term`` and still encode ``term + 1``?"""
    return 0 <= term <= MAX_TERM


TERM_ABOVE_CEILING: Final = "term_above_ceiling"
"""Drop reason for a term a peer may encode but will not adopt (``term_adoptable``)."""


def term_adoptable(term: int, current: int) -> bool:
    """May a peer whose term is ``current`` adopt ``term`` from a message? Any term up to
    ``ADOPT_CEILING``; above it only ``TERM_STEP_ABOVE_CEILING`` beyond ``current``; never
    above ``MAX_TERM``. A term not above ``current`` adopts nothing and is always fine."""
    if term <= current:
        return True
    if term > MAX_TERM:
        return False
    return term <= ADOPT_CEILING or term - current <= TERM_STEP_ABOVE_CEILING


def index_in_range(index: int) -> bool:
    """Can a peer hold ``index`` and still encode the indexes that follow it?"""
    return 0 <= index <= MAX_INDEX


def out_of_range_reason(top_term: int, top_index: int) -> str | None:
    """The drop reason for a message whose highest term is ``top_term`` and highest index
    ``top_index`` (0 when it carries none), or None if both fit. The highest values, not
    every field: every peer message is checked twice (at the codec and in the core), so the
    check is two comparisons (issue #28)."""
    if top_term > MAX_TERM:
        return TERM_OUT_OF_RANGE
    if top_index > MAX_INDEX:
        return INDEX_OUT_OF_RANGE
    return None
