"""Quorum arithmetic -- the only place that counts votes and acknowledgements.

A configuration is given as its *voter groups*: one group for a final configuration C(new),
two for a joint configuration C(old,new) (§6 of the Raft paper, docs/protocol.md §12.4). A decision
needs a majority (``floor(n/2) + 1``) of *every* group.
"""

from __future__ import annotations

from collections.abc import Collection, Container, Mapping, Sequence
from enum import Enum


class VoteResult(Enum):
    """Where an election stands: won, lost, or still open."""
    WON = "won"
    LOST = "lost"
    PENDING = "pending"


def majority(size: int) -> int:
    """Smallest number of voters that forms a majority of ``size``."""
    return size // 2 + 1


def has_quorum(groups: Sequence[Collection[str]], ids: Container[str]) -> bool:
    """Do ``ids`` include a majority of every group?"""
    for group in groups:
        present = 0
        for voter in group:
            if voter in ids:
                present += 1
        if present < majority(len(group)):
            return False
    return True


def committed_index(groups: Sequence[Collection[str]], match: Mapping[str, int]) -> int:
    """Highest index held by a majority of every group (voters missing from ``match`` count
    as holding nothing)."""
    result: int | None = None
    for group in groups:
        held = sorted((match.get(voter, 0) for voter in group), reverse=True)
        index = held[majority(len(group)) - 1]
        result = index if result is None else min(result, index)
    return 0 if result is None else result


def vote_result(groups: Sequence[Collection[str]], votes: Mapping[str, bool]) -> VoteResult:
    """WON when every group granted a majority, LOST when some group can no longer reach one,
    PENDING otherwise. ``votes`` maps voter -> granted for the answers received so far."""
    outcome = VoteResult.WON
    for group in groups:
        granted = rejected = 0
        for voter in group:
            vote = votes.get(voter)
            if vote is True:
                granted += 1
            elif vote is False:
                rejected += 1
        needed = majority(len(group))
        if granted >= needed:
            continue
        if len(group) - rejected < needed:
            return VoteResult.LOST
        outcome = VoteResult.PENDING
    return outcome
