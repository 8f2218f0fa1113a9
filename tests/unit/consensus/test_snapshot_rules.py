"""InstallSnapshot, both sides (docs/protocol.md §9, §12.6)."""

from __future__ import annotations

from consensus_helpers import ack, config, config_entry, elect, entry, make_node, replies, requests

from raftlog.consensus import ConfigChanged, Role, SnapshotChunkWrite, SnapshotInstall
from raftlog.entry import EntryType
from raftlog.rpc.messages import (
    AppendEntries,
    InstallSnapshot,
    InstallSnapshotResponse,
)


def _chunk(
    offset: int, data: bytes, *, index: int = 10, term: int = 3, size: int = 6
) -> InstallSnapshot:
    return InstallSnapshot("n2", 3, index, term, offset, size, data)


def _reply(ready) -> InstallSnapshotResponse:  # type: ignore[no-untyped-def]
    (sent,) = replies(ready)
    assert isinstance(sent.message, InstallSnapshotResponse)
    return sent.message


def test_out_of_order_chunk_is_answered_with_the_bytes_received_so_far() -> None:
    node = make_node(term=3)
    node.receive(_chunk(0, b"abc"))
    ready = node.receive(_chunk(5, b"f"))
    assert _reply(ready) == InstallSnapshotResponse(3, 3)
    assert not ready.snapshot_ops


def test_chunk_of_another_snapshot_restarts_the_receive() -> None:
    node = make_node(term=3)
    node.receive(_chunk(0, b"abc"))
    ready = node.receive(_chunk(3, b"def", index=11))
    assert _reply(ready) == InstallSnapshotResponse(3, 0)


def test_last_chunk_installs_the_snapshot_and_discards_a_conflicting_log() -> None:
    node = make_node(entries=(entry(1), entry(1)), term=3)
    first = node.receive(_chunk(0, b"abc"))
    assert first.snapshot_ops == (SnapshotChunkWrite(10, 3, 6, 0, b"abc"),)
    ready = node.receive(_chunk(3, b"def"))
    assert ready.snapshot_ops == (
        SnapshotChunkWrite(10, 3, 6, 3, b"def"),
        SnapshotInstall(10, 3, finish_receive=True),
    )
    assert _reply(ready) == InstallSnapshotResponse(3)
    assert node.snapshots.read(0, 6) == b"abcdef"
    assert (node.log.snapshot_index, node.log.last_index) == (10, 10)
    assert node.core.commit_index == 10 and node.core.applied_index == 10
    # the configuration at index 10 is unknown: InstallSnapshot does not carry one
    assert any(isinstance(e, ConfigChanged) and not e.known for e in ready.events)
    assert node.hard_state.load().config is None


def test_snapshot_matching_the_log_keeps_the_suffix_and_the_configuration() -> None:
    entries = tuple(entry(3) for _ in range(12))
    node = make_node(entries=entries, term=3)
    ready = node.receive(InstallSnapshot("n2", 3, 10, 3, 0, 1, b"s"))
    assert ready.snapshot_ops[-1] == SnapshotInstall(10, 3, finish_receive=True)
    assert node.log.last_index == 12 and node.core.config_known


def test_snapshot_already_committed_skips_the_transfer() -> None:
    node = make_node(entries=(entry(1),) * 12, term=3, applied=12)
    ready = node.receive(_chunk(0, b"abc"))
    assert _reply(ready) == InstallSnapshotResponse(3, 6)  # "continue at the end"
    assert not ready.snapshot_ops
    final = node.receive(_chunk(6, b""))
    assert _reply(final) == InstallSnapshotResponse(3)


def test_unknown_configuration_blocks_campaigning_until_a_config_entry_arrives() -> None:
    node = make_node(term=3, election_ticks=(10, 10))
    node.receive(InstallSnapshot("n2", 3, 10, 3, 0, 1, b"s"))
    node.tick(100)
    assert node.core.role is Role.FOLLOWER and node.core.term == 3
    cfg = config("n1", "n2", "n3")
    node.receive(AppendEntries("n2", 3, 10, 3, 0, (config_entry(3, cfg),)))
    assert node.core.config_known
    node.tick(100)
    assert node.core.role is Role.CANDIDATE


def test_leader_streams_its_snapshot_in_chunks_and_resumes_where_asked() -> None:
    data = bytes(range(150))
    node = make_node(
        entries=(entry(1),) * 5, term=1, applied=5, snapshot=(5, 1, data), max_append_bytes=64
    )
    probe = next(m for m in requests(elect(node), AppendEntries) if m.to == "n2")
    ready = ack(node, probe, success=False, hint=1)
    # the configuration entry is inside the snapshot: it is re-appended after it
    refreshed = node.core.entries(node.core.last_index, node.core.last_index + 1)[0]
    assert refreshed.entry_type == EntryType.CONFIG
    offsets = []
    chunk = next(m.message for m in requests(ready, InstallSnapshot))
    while True:
        assert isinstance(chunk, InstallSnapshot) and chunk.last_included_index == 5
        offsets.append(chunk.offset)
        resume = 10 if chunk.offset == 64 and offsets.count(64) == 1 else None
        ready = node.answer("n2", chunk, InstallSnapshotResponse(chunk.term, resume))
        more = [m.message for m in requests(ready, InstallSnapshot)]
        if not more:
            break
        chunk = more[0]
    assert offsets == [0, 64, 10, 74, 138]
    follow_up = next(m.message for m in requests(ready, AppendEntries) if m.to == "n2")
    assert follow_up.prev_log_index == 5 and follow_up.prev_log_term == 1
    assert node.core._s.progress["n2"].match == 5
