"""Restart from durable state only (docs/protocol.md §12.3; RELIABILITY §7 items 1, 14)."""

from __future__ import annotations

from random import Random

import pytest
from consensus_helpers import config, config_entry, elect, entry, make_node, requests, rid

from raftlog.consensus import CoreConfig, RaftCore, Role, SnapshotInstall
from raftlog.rpc.messages import AppendEntries, RequestVote
from raftlog.storage.base import HardState
from raftlog.storage.memory import MemoryLogStore
from raftlog.storage.memory_snapshot import MemorySnapshotStore


def test_commit_index_restarts_at_last_applied() -> None:
    node = make_node(entries=(entry(1),) * 5, term=1, applied=3)
    assert node.core.commit_index == 3
    assert [index for index, _ in node.applied] == []


def test_never_saved_seed_configuration_is_persisted_in_the_first_ready() -> None:
    log, snaps = MemoryLogStore(), MemorySnapshotStore()
    seed = config("n1", "n2", "n3")
    core = RaftCore(
        CoreConfig("n1"),
        log,
        snaps,
        HardState(),
        seed_config=seed,
        rng=Random(1),
        new_request_id=rid,
    )
    ready = core.ready()
    assert ready.hard_state is not None and ready.hard_state.config == seed


def test_uncommitted_configuration_is_recovered_and_can_still_roll_back() -> None:
    seed = config("n1", "n2", "n3")
    bigger = config("n1", "n2", "n3", "n4")
    node = make_node(
        members=seed,
        entries=(entry(1), config_entry(1, bigger)),
        term=1,
        applied=1,
        saved_config=bigger,
        config_index=2,
    )
    assert node.core.config == bigger
    node.receive(AppendEntries("n2", 2, 1, 1, 0, (entry(2),)))
    assert node.core.config == seed


def test_configuration_saved_ahead_of_the_log_is_ignored() -> None:
    """A crash between the hard-state write and the append of one Ready."""
    seed = config("n1", "n2", "n3")
    node = make_node(
        members=seed,
        entries=(entry(1),),
        term=1,
        applied=1,
        saved_config=config("n1", "n2"),
        config_index=2,
    )
    assert node.core.config == seed


def test_snapshot_ahead_of_the_state_machine_is_installed_again() -> None:
    node = make_node(entries=(entry(1),) * 5, term=1, applied=2, snapshot=(4, 1, b"state"))
    first = node.readies[0]
    assert SnapshotInstall(4, 1, finish_receive=False) in first.snapshot_ops
    assert node.core.commit_index == 4


def test_inconsistent_durable_state_is_refused() -> None:
    log = MemoryLogStore()
    log.append(1, [entry(1)])
    seed = config("n1", "n2", "n3")
    for bad in (HardState(current_term=1, last_applied=5), HardState(current_term=0)):
        with pytest.raises(ValueError):
            RaftCore(
                CoreConfig("n1"),
                log,
                MemorySnapshotStore(),
                bad,
                seed_config=seed,
                rng=Random(1),
                new_request_id=rid,
            )


def test_removed_leader_stays_a_voter_when_its_joint_configuration_was_compacted() -> None:
    """The leader that removed itself appended C(new) and crashed before anyone else got it;
    the committed joint C(old,new) is inside its snapshot. Nothing durable says it was in the
    old half, but it may hold the only copy of C(new): it must still campaign (under C(new))
    instead of waiting as a CLIENT for a vote the still-joint peers can never win."""
    joint = config("n2", "n3", old=("n1", "n2", "n3"))
    final = config("n2", "n3")
    node = make_node(
        entries=(config_entry(1, joint), entry(1), config_entry(1, final), entry(1)),
        term=1,
        applied=2,
        saved_config=final,
        config_index=3,
        snapshot=(2, 1, b"state"),
    )
    assert node.core.first_index == 3 and node.core.config == final
    assert node.core.role is Role.FOLLOWER
    ready = elect(node, grant_from=("n2", "n3"))  # votes counted under C(new) only
    assert sorted(send.to for send in requests(ready, RequestVote)) == ["n2", "n3"]
