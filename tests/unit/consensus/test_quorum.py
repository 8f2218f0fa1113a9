"""Table tests of the quorum arithmetic (majority and joint)."""

from __future__ import annotations

import pytest

from raftlog.consensus.quorum import (
    VoteResult,
    committed_index,
    has_quorum,
    majority,
    vote_result,
)

A, B, C, D, E = "a", "b", "c", "d", "e"


@pytest.mark.parametrize(("size", "needed"), [(1, 1), (2, 2), (3, 2), (4, 3), (5, 3), (6, 4)])
def test_majority_is_floor_half_plus_one(size: int, needed: int) -> None:
    assert majority(size) == needed


@pytest.mark.parametrize(
    ("groups", "match", "expected"),
    [
        ([{A}], {A: 7}, 7),
        ([{A, B, C}], {A: 5, B: 3, C: 9}, 5),
        ([{A, B, C}], {A: 5}, 0),
        ([{A, B, C, D}], {A: 5, B: 4, C: 3, D: 9}, 4),
        # joint: the smaller of the two majorities
        ([{A, B, C}, {C, D, E}], {A: 9, B: 9, C: 2, D: 1, E: 0}, 1),
        ([{A, B, C}, {C, D, E}], {A: 9, B: 9, C: 8, D: 8, E: 0}, 8),
    ],
)
def test_committed_index_needs_a_majority_of_every_group(
    groups: list[set[str]], match: dict[str, int], expected: int
) -> None:
    assert committed_index(groups, match) == expected


@pytest.mark.parametrize(
    ("groups", "votes", "expected"),
    [
        ([{A, B, C}], {A: True}, VoteResult.PENDING),
        ([{A, B, C}], {A: True, B: True}, VoteResult.WON),
        ([{A, B, C}], {A: True, B: False, C: False}, VoteResult.LOST),
        ([{A}], {A: True}, VoteResult.WON),
        # joint: winning the old half is not enough
        ([{A, B, C}, {C, D, E}], {A: True, B: True}, VoteResult.PENDING),
        ([{A, B, C}, {C, D, E}], {A: True, B: True, C: True, D: True}, VoteResult.WON),
        ([{A, B, C}, {C, D, E}], {A: True, B: True, D: False, E: False}, VoteResult.LOST),
        # votes of non-members do not count
        ([{A, B, C}], {A: True, D: True, E: True}, VoteResult.PENDING),
    ],
)
def test_vote_result_counts_each_group(
    groups: list[set[str]], votes: dict[str, bool], expected: VoteResult
) -> None:
    assert vote_result(groups, votes) is expected


def test_has_quorum_counts_answers_either_way() -> None:
    assert has_quorum([{A, B, C}], {A: True, B: False})
    assert not has_quorum([{A, B, C}, {C, D, E}], {A: True, B: False})
