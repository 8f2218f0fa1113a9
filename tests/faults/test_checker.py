"""Negative controls for the history checker on synthetic histories: each planted violation
(one lost ack, one duplicate, one divergent entry, ...) is flagged, and only that one; the
same history without the plant is valid, so every flag is the plant's doing."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from faults.history import Op, PeerLog, TopicRead, TopicRow, check, read_peer_log
from raftlog.entry import EntryType, LogEntry
from raftlog.storage.rocks import open_storage
from raftlog.topics.client import make_record, publish_data
from raftlog.topics.stamp import stamp_append_time


def rid(client: int, seq: int) -> bytes:
    return bytes([client]) * 4 + seq.to_bytes(8, "big")


def state(op: Op, term: int = 1) -> LogEntry:
    return LogEntry(op.request_id, EntryType.STATE, term, op.data)


def history(n: int = 10, clients: int = 2) -> tuple[list[Op], list[PeerLog]]:
    """``clients`` clients taking turns, each op acked at the next index, 3 identical peers."""
    ops: list[Op] = []
    entries: dict[int, LogEntry] = {1: LogEntry.checkpoint(1)}
    t = 0.0
    for k in range(n):
        client = k % clients
        op = Op(f"c{client}", k // clients + 1, rid(client, k), f"c{client}-{k}".encode(), t)
        op.complete_t, op.outcome, op.index = t + 0.5, "ok", k + 2
        entries[k + 2] = state(op)
        ops.append(op)
        t += 1.0
    last = n + 1
    peers = [PeerLog(p, last, 1, dict(entries)) for p in ("1", "2", "3")]
    return ops, peers


def test_clean_history_is_valid() -> None:
    ops, peers = history()
    report = check(ops, peers)
    assert report.valid, report.summary()
    assert report.acked == 10


def test_one_lost_ack_is_flagged() -> None:
    ops, peers = history()
    for p in peers:  # index 5 lost on every peer: the suffix moved down by one
        entries = {i: e for i, e in p.entries.items() if i != 5}
        p.entries = {(i if i < 5 else i - 1): e for i, e in sorted(entries.items())}
        p.commit_index -= 1
    report = check(ops, peers)
    assert report.count("lost") == 1, report.summary()
    assert "c1#2" in report.lost[0]
    assert report.count("duplicated") == 0


def test_one_duplicate_is_flagged() -> None:
    ops, peers = history()
    for p in peers:
        p.entries[12] = p.entries[4]  # a retry appended a second time
        p.commit_index = 12
    report = check(ops, peers)
    assert report.count("duplicated") == 1, report.summary()
    assert "[4, 12]" in report.duplicated[0]
    assert report.count("lost") == report.count("divergent") == 0


def test_one_divergent_entry_is_flagged() -> None:
    ops, peers = history()
    other = ops[6]
    peers[2].entries[8] = LogEntry(other.request_id, EntryType.STATE, 2, b"something else")
    report = check(ops, peers)
    # peer 3 disagrees at index 8; the ack of index 8 still matches the majority's entry
    assert report.count("divergent") == 1, report.summary()
    assert "index 8" in report.divergent[0]


def test_an_ack_pointing_at_another_entry_is_divergent() -> None:
    ops, peers = history()
    ops[3].index = 4  # the client was told index 4, which holds another op
    report = check(ops, peers)
    assert report.count("divergent") == 1, report.summary()


def test_order_and_real_time_violations_are_flagged() -> None:
    ops, peers = history()
    a, b = ops[2], ops[4]  # same client c0; swap their places in the log
    a.index, b.index = b.index, a.index
    for p in peers:
        p.entries[a.index], p.entries[b.index] = state(a), state(b)
    report = check(ops, peers)
    assert report.count("order") >= 1, report.summary()
    assert report.count("lost") == report.count("divergent") == 0


def test_unacknowledged_but_landed_is_counted_not_flagged() -> None:
    ops, peers = history()
    ops[5].outcome, ops[5].index = "info", None  # timed out, landed anyway
    report = check(ops, peers)
    assert report.valid and report.unacked_landed == 1
    ops[5].outcome = "fail"  # but a definite refusal that landed is a violation
    assert check(ops, peers).count("unexpected") == 1


def test_phantom_entry_and_lagging_peer_are_flagged() -> None:
    ops, peers = history()
    phantom = LogEntry(rid(9, 9), EntryType.STATE, 1, b"nobody sent this")
    for p in peers:
        p.entries[12], p.commit_index = phantom, 12
    peers[1].commit_index = 11
    report = check(ops, peers)
    assert report.count("unexpected") == 1 and report.count("lagging") == 1, report.summary()


def test_lagging_is_measured_from_the_agreed_commit_index() -> None:
    """After ``wait_converged`` the peers stop one by one; an entry committed meanwhile (a
    clock tick) may reach only some of them. That tail is not lagging; a member whose
    stored log stops short of the index all reported together is."""
    ops, peers = history()
    tick = LogEntry.checkpoint(1)
    for p in peers:
        p.entries[12], p.commit_index = tick, 12
    peers[1].commit_index = 11  # stopped before the leader's next tick told it of 12
    assert check(ops, peers, agreed=11).count("lagging") == 0
    assert check(ops, peers).count("lagging") == 1  # no agreed index: the highest is the mark
    peers[2].commit_index = 10  # holds less than it reported committed
    report = check(ops, peers, agreed=11)
    assert report.lagging == ["peer 3 committed 10 < 11"], report.summary()


def topic_history() -> tuple[list[Op], list[PeerLog], list[TopicRow]]:
    ops, peers = history(4)
    rows = []
    for n in range(3):
        op = Op("p0", n + 1, rid(7, n), f"p0-{n}".encode(), 10.0 + n, 10.5 + n, "ok", 6 + n)
        data = stamp_append_time(publish_data([make_record("chaos", op.data)]), 1000 + n)
        for p in peers:
            p.entries[6 + n] = LogEntry(op.request_id, EntryType.STATE, 1, data)
            p.commit_index = 8
        ops.append(op)
        rows.append(TopicRow(6 + n, 0, op.data))
    return ops, peers, rows


def test_topic_reads_equal_to_the_log_pass_and_a_missing_record_is_flagged() -> None:
    ops, peers, rows = topic_history()
    reads = [TopicRead(p.peer, "chaos", 8, list(rows)) for p in peers]
    assert check(ops, peers, reads).valid
    reads[1].rows.pop(1)
    report = check(ops, peers, reads)
    assert report.count("topic") == 1, report.summary()


def test_topic_retention_allows_expired_records_only() -> None:
    ops, peers, rows = topic_history()
    # retention 1.5 s, read at 3000 ms: record 0 (appended at 1000) is past the window
    reads = [TopicRead(p.peer, "chaos", 8, rows[1:], 3000, 2500) for p in peers]
    assert check(ops, peers, reads).valid
    reads[0].rows = [*rows[1:2], TopicRow(8, 0, b"forged")]
    assert check(ops, peers, reads).count("topic") >= 1


def test_read_peer_log_reads_a_data_directory(tmp_path: Path) -> None:
    ops, peers = history(5)
    log, hard_state, snapshots = open_storage(tmp_path / "peer")
    try:
        entries = peers[0].entries
        log.append(1, [entries[i] for i in sorted(entries)])
    finally:
        for store in (log, hard_state, snapshots):
            store.close()
    got = read_peer_log("1", tmp_path / "peer", commit_index=6)
    assert got.entries == entries and got.commit_index == 6
    assert check(ops, [got, copy.deepcopy(got)]).valid


@pytest.mark.parametrize("bad_commit", [100])
def test_commit_index_is_capped_by_the_log(tmp_path: Path, bad_commit: int) -> None:
    log, hard_state, snapshots = open_storage(tmp_path / "peer")
    try:
        log.append(1, [LogEntry.checkpoint(1)])
    finally:
        for store in (log, hard_state, snapshots):
            store.close()
    assert read_peer_log("1", tmp_path / "peer", commit_index=bad_commit).commit_index == 1


def test_topic_reads_are_compared_above_each_peers_compaction_point() -> None:
    ops, peers, rows = topic_history()
    # peer 2 compacted up to index 6: it no longer serves that record; the others still do
    peers[1].entries = {i: e for i, e in peers[1].entries.items() if i > 6}
    peers[1].first_index = 7
    reads = [TopicRead(p.peer, "chaos", 8, rows if p.peer != "2" else rows[1:]) for p in peers]
    report = check(ops, peers, reads)
    assert report.valid, report.summary()
    reads[1].rows = rows[2:]  # but a record above its compaction point must be there
    assert check(ops, peers, reads).count("topic") == 1
