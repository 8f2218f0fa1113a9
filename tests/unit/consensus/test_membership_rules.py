"""Joint consensus and ConfigUpdate (docs/protocol.md §10.4, §12.4; Raft §6)."""

from __future__ import annotations

from consensus_helpers import (
    NOW_MS,
    ack,
    config,
    config_entry,
    elect,
    entry,
    make_node,
    requests,
    rid,
)

from raftlog.consensus import (
    ConfigAccepted,
    ConfigBusy,
    ConfigChangeCompleted,
    ConfigChanged,
    ConfigDone,
    ConfigExpired,
    ConfigNotLeader,
    ConfigRejected,
    Role,
    SteppedDown,
)
from raftlog.consensus.results import WRONG_ENTRY_TYPE
from raftlog.rpc.messages import AppendEntries, ConfigUpdateErrorInfo

PEERS_124 = [
    ["n1", "tcp://127.0.0.2:5000"],
    ["n2", "tcp://127.0.0.3:5000"],
    ["n4", "tcp://127.0.0.5:5000"],
]


def _settle(node, ready) -> None:  # type: ignore[no-untyped-def]
    pending = list(requests(ready, AppendEntries))
    while pending:
        pending = list(requests(ack(node, pending.pop(0)), AppendEntries)) + pending


def _leader():  # type: ignore[no-untyped-def]
    node = make_node()
    _settle(node, elect(node))
    return node


def test_follower_adopts_a_configuration_when_its_entry_is_appended() -> None:
    node = make_node(term=1)
    new = config("n1", "n2", "n3", "n4")
    ready = node.receive(AppendEntries("n2", 1, 0, 0, 0, (config_entry(1, new),)))
    assert node.core.config == new and node.core.config_index == 1
    assert ConfigChanged(new, 1, True) in ready.events
    assert node.hard_state.load().config == new


def test_configuration_is_rolled_back_when_its_entry_is_truncated() -> None:
    seed = config("n1", "n2", "n3")
    node = make_node(members=seed, term=1)
    node.receive(AppendEntries("n2", 1, 0, 0, 0, (config_entry(1, config("n1", "n2")),)))
    ready = node.receive(AppendEntries("n3", 2, 0, 0, 0, (entry(2),)))
    assert node.core.config == seed and node.core.config_index == 0
    assert ConfigChanged(seed, 0, True) in ready.events
    assert node.hard_state.load().config == seed


def test_config_update_on_a_follower_names_the_leader() -> None:
    node = make_node(term=1)
    node.receive(AppendEntries("n2", 1, 0, 0, 0))
    assert node.core.propose_config(rid(), PEERS_124, NOW_MS) == ConfigNotLeader("n2")


def test_config_update_with_an_expired_request_id() -> None:
    node = _leader()
    stale = rid(seconds=NOW_MS // 1000 - 9 * 3600)
    assert node.core.propose_config(stale, PEERS_124, NOW_MS) == ConfigExpired()


def test_config_update_with_an_invalid_list_reports_the_reference_error() -> None:
    node = _leader()
    same = [
        ["n1", "tcp://127.0.0.2:5000"],
        ["n2", "tcp://127.0.0.3:5000"],
        ["n3", "tcp://127.0.0.4:5000"],
    ]
    assert node.core.propose_config(rid(), same, NOW_MS) == ConfigRejected(
        ConfigUpdateErrorInfo("Error", "no change in cluster membership")
    )
    assert node.core.propose_config(rid(), "n4", NOW_MS) == ConfigRejected(
        ConfigUpdateErrorInfo("TypeError", "peers must be an array")
    )


def test_config_update_switches_to_the_joint_configuration_at_once() -> None:
    node = _leader()
    request_id = rid()
    result = node.core.propose_config(request_id, PEERS_124, NOW_MS)
    assert isinstance(result, ConfigAccepted)
    assert node.core.config.is_joint and node.core.config_index == result.joint_index
    ready = node.run()
    assert ready.hard_state is not None and ready.hard_state.config == node.core.config
    assert sorted({m.to for m in requests(ready, AppendEntries)}) == ["n2", "n3", "n4"]
    assert node.core.propose_config(request_id, PEERS_124, NOW_MS) == result
    assert node.core.propose_config(rid(), PEERS_124, NOW_MS) == ConfigBusy()


def test_committed_joint_entry_is_followed_by_c_new_and_completion() -> None:
    node = _leader()
    request_id = rid()
    accepted = node.core.propose_config(request_id, PEERS_124, NOW_MS)
    assert isinstance(accepted, ConfigAccepted)
    events = []
    for send in requests(node.run(), AppendEntries):
        if send.to in ("n2", "n4"):
            events.extend(ack(node, send).events)
    final = node.core.config
    assert not final.is_joint and [p.id for p in final.new] == ["n1", "n2", "n4"]
    assert ConfigChangeCompleted(accepted.joint_index, node.core.config_index) in events
    c_new = node.core.entries(node.core.config_index, node.core.config_index + 1)[0]
    assert c_new.request_id != request_id
    assert node.core.propose_config(request_id, PEERS_124, NOW_MS) == ConfigDone(
        accepted.joint_index
    )
    assert node.core.propose_config(rid(), PEERS_124[:2], NOW_MS) == ConfigBusy()  # C(new) open


def test_config_update_with_the_request_id_of_a_pending_update_is_refused() -> None:
    node = _leader()
    state_id = rid()
    node.core.propose(state_id, b"x", NOW_MS)
    assert node.core.propose_config(state_id, PEERS_124, NOW_MS) == ConfigRejected(WRONG_ENTRY_TYPE)


def test_new_leader_completes_an_inherited_committed_joint_configuration() -> None:
    joint = config("n1", "n2", "n4", old=("n1", "n2", "n3"))
    node = make_node(entries=(config_entry(1, joint),), term=1, saved_config=joint, config_index=1)
    ready = elect(node, grant_from=("n2",))
    assert node.core.config.is_joint
    for send in requests(ready, AppendEntries):
        if send.to == "n2":
            ready = ack(node, send)
    assert not node.core.config.is_joint
    assert any(isinstance(e, ConfigChangeCompleted) and e.joint_index == 1 for e in ready.events)


def test_leader_outside_c_new_leads_until_c_new_commits_then_steps_down() -> None:
    node = _leader()
    without_me = [["n2", "tcp://127.0.0.3:5000"], ["n3", "tcp://127.0.0.4:5000"]]
    node.core.propose_config(rid(), without_me, NOW_MS)
    pending = requests(node.run(), AppendEntries)
    events = []
    while pending and node.core.role is Role.LEADER:
        ready = ack(node, pending.pop(0))
        events.extend(ready.events)
        pending += requests(ready, AppendEntries)
        if node.core.role is Role.LEADER and not node.core.config.is_joint:
            assert node.core.commit_index < node.core.config_index or pending
    assert node.core.role is Role.CLIENT
    assert any(isinstance(e, SteppedDown) and e.reason == "removed" for e in events)
    assert node.core.commit_index >= node.core.config_index


def test_peer_outside_its_newest_uncommitted_configuration_may_still_campaign() -> None:
    """The removed leader may hold the only copy of C(new) (see ConfigHistory.involves)."""
    joint = config("n2", "n3", old=("n1", "n2", "n3"))
    final = config("n2", "n3")
    node = make_node(
        entries=(config_entry(1, joint), config_entry(1, final)),
        term=1,
        applied=1,
        saved_config=final,
        config_index=2,
    )
    assert node.core.role is Role.FOLLOWER
    node.tick(100)
    assert node.core.role is Role.CANDIDATE
