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

INDEX_OUT_OF_RANGE: Final = "index_out_of_range"
"""Drop reason (counter and log event name) for an index above ``MAX_INDEX``."""


def term_in_range(term: int) -> bool:
    """Can a peer adopt ``term`` and still encode ``term + 1``?"""
    return 0 <= term <= MAX_TERM


def index_in_range(index: int) -> bool:
    """Can a peer hold ``index`` and still encode the indexes that follow it?"""
    return 0 <= index <= MAX_INDEX


def out_of_range_reason(terms: tuple[int, ...], indexes: tuple[int, ...]) -> str | None:
    """The drop reason for a message carrying these terms and indexes, or None if all fit."""
    if any(term > MAX_TERM for term in terms):
        return TERM_OUT_OF_RANGE
    if any(index > MAX_INDEX for index in indexes):
        return INDEX_OUT_OF_RANGE
    return None
