"""Issue #18 rules of the topic machine: transactions stored over several entries, visible
only at their commit (ids at the commit's index), rolled back or timed out by the log clock,
bounded, carried by snapshots, and never compacted away while they matter."""

from __future__ import annotations

from pathlib import Path

import pytest
from machine_log import Log
from test_topic_machine import ids, read, values

from raftlog.errors import TopicError, TransactionError
from raftlog.statemachine.composite import CompositeStateMachine
from raftlog.storage.memory_snapshot import MemorySnapshotStore
from raftlog.topics import tx as topic_tx
from raftlog.topics import wire_counts as topic_counts
from raftlog.topics import wire_tx as tx_rpc
from raftlog.topics.machine import TopicStateMachine
from raftlog.topics.records import Record, RecordId, TopicCommand, encode_command
from raftlog.topics.records_tx import TxControl, encode_tx_control, encode_tx_store
from raftlog.topics.stamp import stamp_append_time


class TxLog(Log):
    """The test log plus transaction entries, stamped the way the leader stamps them."""

    def begin(self, txid: str, timeout_ms: int = 10_000, at: int | None = None) -> int:
        data = encode_tx_control(TxControl("begin", txid, timeout_ms))
        return self.add(stamp_append_time(data, self.now if at is None else at))

    def put(self, txid: str, *records: Record, at: int | None = None, auto: bool = False) -> int:
        data = stamp_append_time(
            encode_tx_store(txid, list(records)), self.now if at is None else at, auto_create=auto
        )
        return self.add(data)

    def commit(self, txid: str, at: int | None = None) -> int:
        data = encode_tx_control(TxControl("commit", txid))
        return self.add(stamp_append_time(data, self.now if at is None else at))

    def rollback(self, txid: str, at: int | None = None) -> int:
        data = encode_tx_control(TxControl("rollback", txid))
        return self.add(stamp_append_time(data, self.now if at is None else at))


@pytest.fixture
def log() -> TxLog:
    return TxLog()


def test_stored_records_are_invisible_until_the_commit_then_appear_at_its_index(
    log: TxLog, machine: TopicStateMachine
) -> None:
    log.create("a")
    log.create("b")
    log.begin("t1")
    log.put("t1", Record("a", b"a1"), Record("b", b"b1"))
    plain = log.publish(Record("a", b"plain"))  # another writer, while t1 is open
    log.put("t1", Record("a", b"a2"))
    log.apply(machine)
    assert values(read(machine, "a")) == [b"plain"]  # an open transaction blocks nobody
    assert values(read(machine, "b")) == []
    counts = machine.counts(topic_counts.CountsRequest(1, machine.last_applied, 1000, None))
    assert sum(counts.records) == 1
    reader_was_at = machine.last_applied  # a follower that already read past the stores
    commit = log.commit("t1")
    after = log.publish(Record("a", b"later"))
    log.apply(machine)
    a = read(machine, "a")
    assert values(a) == [b"plain", b"a1", b"a2", b"later"]
    assert ids(a) == [(plain, 0), (commit, 0), (commit, 2), (after, 0)]
    assert ids(read(machine, "b")) == [(commit, 1)]
    # the follower continuing after what it saw still gets every committed record, once
    tail = read(machine, "a", from_index=reader_was_at, from_position=2**32 - 1, inclusive=False)
    assert values(tail) == [b"a1", b"a2", b"later"]
    assert all(r.append_time_ms == log.now for r in a.records)
    status = machine.transaction("t1")
    assert (status.state, status.commit_index, status.records) == ("committed", commit, 3)
    counts = machine.counts(topic_counts.CountsRequest(1, machine.last_applied, 1000, None))
    assert sum(counts.records) == 5


def test_rollback_and_timeout_make_nothing_visible_ever(
    log: TxLog, machine: TopicStateMachine
) -> None:
    log.create("a")
    log.begin("rolled")
    log.put("rolled", Record("a", b"r"))
    log.begin("slow", timeout_ms=500)
    log.put("slow", Record("a", b"s"))
    rollback = log.rollback("rolled")
    log.apply(machine)
    assert machine.transaction("rolled").state == "aborted"
    assert machine.transaction("slow").state == "open"
    assert machine.next_expiry() == log.now + 500  # the leader ticks at the deadline
    tick = log.tick(log.now + 500)  # the log clock, not any peer's, passes the deadline
    late_commit = log.commit("slow")
    log.commit("rolled")
    log.apply(machine)
    slow = machine.transaction("slow")
    assert (slow.state, slow.end_index) == ("expired", tick)
    assert values(read(machine, "a")) == []
    refusal = machine.refusal_at(late_commit)
    assert isinstance(refusal, TransactionError) and refusal.name == "TransactionExpired"
    assert machine.refusal_at(late_commit + 1).name == "TransactionAborted"  # type: ignore[union-attr]
    assert machine.transaction("rolled").end_index == rollback


def test_commit_or_store_stamped_past_the_deadline_is_refused(
    log: TxLog, machine: TopicStateMachine
) -> None:
    log.create("a")
    log.begin("t", timeout_ms=100)
    log.apply(machine)
    late = log.put("t", Record("a", b"x"), at=log.now + 100)  # expires *before* applying
    log.apply(machine)
    assert machine.refusal_at(late).name == "TransactionExpired"  # type: ignore[union-attr]
    assert machine.transaction("t").state == "expired"


def test_the_transaction_rules_refuse_deterministically(
    log: TxLog, machine: TopicStateMachine
) -> None:
    log.create("a", max_record_bytes=10)
    refused = [
        log.put("nobody", Record("a", b"x")),
        log.commit("nobody"),
    ]
    log.begin("t")
    refused.append(log.begin("t"))  # open already
    refused.append(log.put("t", Record("missing", b"x")))
    refused.append(log.put("t", Record("a", b"x" * 11)))
    ok = log.put("t", Record("auto", b"x"), auto=True)  # AUTO_CREATE works as for batches
    log.apply(machine)
    names = [machine.refusal_at(i).name for i in refused]  # type: ignore[union-attr]
    assert names == [
        "UnknownTransaction",
        "UnknownTransaction",
        "TransactionExists",
        "UnknownTopic",
        "RecordTooLarge",
    ]
    assert machine.refusal_at(ok) is None and "auto" in machine.topics
    assert machine.transaction("t").records == 1  # a refused store leaves it open, unchanged


def test_limits_are_enforced_with_clear_errors(
    log: TxLog, machine: TopicStateMachine, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(topic_tx, "MAX_OPEN_TRANSACTIONS", 2)
    monkeypatch.setattr(topic_tx, "MAX_TX_RECORDS", 3)
    monkeypatch.setattr(topic_tx, "MAX_TX_BYTES", 10)
    log.create("a")
    log.begin("one")
    log.begin("two")
    third = log.begin("three")
    log.put("one", Record("a", b"1"), Record("a", b"2"))
    too_many = log.put("one", Record("a", b"3"), Record("a", b"4"))
    too_big = log.put("two", Record("a", b"x" * 11))
    log.apply(machine)
    for index, words in ((third, "2 transactions are open"), (too_many, "4 records"),
                         (too_big, "11 bytes")):
        error = machine.refusal_at(index)
        assert error is not None and error.name == "TransactionLimit"
        assert words in error.message
    log.rollback("two")
    assert log.begin("three") > 0
    log.apply(machine)
    assert machine.transaction("three").state == "open"


def test_a_deleted_topic_aborts_the_whole_commit(log: TxLog, machine: TopicStateMachine) -> None:
    log.create("a")
    log.create("b")
    log.begin("t")
    log.put("t", Record("a", b"1"), Record("b", b"2"))
    log.add(encode_command(TopicCommand("delete", "b")))
    log.create("b")  # re-created: the store belonged to the old incarnation
    commit = log.commit("t")
    log.apply(machine)
    assert machine.refusal_at(commit).name == "TransactionAborted"  # type: ignore[union-attr]
    assert values(read(machine, "a")) == [] and values(read(machine, "b")) == []


def test_interleaved_transactions_commit_in_commit_order(
    log: TxLog, machine: TopicStateMachine
) -> None:
    log.create("a")
    log.begin("x")
    log.begin("y")
    log.put("x", Record("a", b"x1"))
    log.put("y", Record("a", b"y1"))
    log.put("x", Record("a", b"x2"))
    log.put("y", Record("a", b"y2"))
    cy = log.commit("y")
    cx = log.commit("x")
    log.apply(machine)
    assert ids(read(machine, "a")) == [(cy, 0), (cy, 1), (cx, 0), (cx, 1)]
    assert values(read(machine, "a")) == [b"y1", b"y2", b"x1", b"x2"]
    # a transaction id may be used again once its transaction ended
    log.begin("x")
    log.put("x", Record("a", b"again"))
    again = log.commit("x")
    log.apply(machine)
    assert values(read(machine, "a", from_index=again)) == [b"again"]


def test_retention_ttl_and_size_count_from_the_commit(
    log: TxLog, machine: TopicStateMachine
) -> None:
    log.create("a", retention_ms=1_000)
    log.begin("t")
    log.put("t", Record("a", b"short", ttl_ms=300), Record("a", b"long"))
    log.now += 900  # stored long ago: the clocks start at the commit
    log.commit("t")
    log.apply(machine)
    assert values(read(machine, "a")) == [b"short", b"long"]
    log.tick(log.now + 300)
    log.apply(machine)
    assert values(read(machine, "a")) == [b"long"]
    log.tick(log.now + 700)
    log.apply(machine)
    assert values(read(machine, "a")) == []


def test_compaction_never_passes_an_open_or_retained_transaction(
    log: TxLog, machine: TopicStateMachine
) -> None:
    log.create("keep")
    log.create("gone", retention_ms=100)
    begin = log.begin("open")
    log.put("open", Record("keep", b"1"))
    log.apply(machine)
    assert machine.compaction_limit() == begin - 1  # open: its begin must stay
    log.commit("open")
    log.apply(machine)
    assert machine.compaction_limit() == begin - 1  # committed, retained: its stores stay
    log.add(encode_command(TopicCommand("delete", "keep")))
    b2 = log.begin("short")
    log.put("short", Record("gone", b"x"))
    log.commit("short")
    log.begin("dropped")
    log.put("dropped", Record("gone", b"y"))
    rolled = log.rollback("dropped")
    log.apply(machine)
    assert machine.compaction_limit() == b2 - 1  # "short" still retained
    log.tick(log.now + 100)
    log.apply(machine)
    # everything expired or rolled back: the log may go, but never into a span
    assert machine.compaction_limit() == machine.last_applied
    assert machine.compaction_limit() > rolled


def test_snapshot_inside_an_open_transaction_restores_the_same_visibility(
    log: TxLog, tmp_path: Path
) -> None:
    log.create("a")
    log.begin("t", timeout_ms=5_000)
    log.put("t", Record("a", b"1"))
    log.begin("r")
    log.put("r", Record("a", b"lost"))
    cut = log.put("t", Record("a", b"2"))
    log.put("t", Record("a", b"3"))
    log.rollback("r")
    commit = log.commit("t")
    original = TopicStateMachine(tmp_path / "orig", log.store)
    log.apply(original)
    data = CompositeStateMachine([original]).snapshot(cut)  # forced inside both spans
    expected = ids(read(original, "a"))
    original.close()
    log.store.compact(cut, 1)
    snapshots = MemorySnapshotStore()
    snapshots.install(cut, 1, data)
    newcomer = TopicStateMachine(tmp_path / "new", log.store)
    try:
        newcomer.catch_up(snapshots, log.store.last_index)
        assert ids(read(newcomer, "a")) == expected == [(commit, 0), (commit, 1), (commit, 2)]
        assert values(read(newcomer, "a")) == [b"1", b"2", b"3"]
        assert newcomer.transaction("r").state == "aborted"
    finally:
        newcomer.close()


def test_open_transactions_survive_a_restart(log: TxLog, tmp_path: Path) -> None:
    log.create("a")
    log.begin("t", timeout_ms=1_000)
    log.put("t", Record("a", b"1"))
    first = TopicStateMachine(tmp_path / "m", log.store)
    log.apply(first)
    first.close()
    again = TopicStateMachine(tmp_path / "m", log.store)
    try:
        info = again.transaction("t")
        assert (info.state, info.records, info.deadline_ms) == ("open", 1, log.now + 1_000)
        assert again.next_expiry() == log.now + 1_000
        commit = log.commit("t")
        log.apply(again)
        assert ids(read(again, "a")) == [(commit, 0)]
    finally:
        again.close()


def test_status_request_round_trip(log: TxLog, machine: TopicStateMachine) -> None:
    log.create("a")
    begin = log.begin("t")
    log.apply(machine)
    frames = machine.handle_request(tx_rpc.TYPE_TX_STATUS, tx_rpc.encode_status_request("t"))
    assert frames is not None
    info = tx_rpc.decode_status_response(frames)
    assert (info.txid, info.state, info.begin_index) == ("t", "open", begin)
    unknown = machine.handle_request(tx_rpc.TYPE_TX_STATUS, tx_rpc.encode_status_request("u"))
    assert unknown is not None
    with pytest.raises(TransactionError) as caught:
        tx_rpc.decode_status_response(unknown)
    assert caught.value.name == "UnknownTransaction" and caught.value.txid == "u"
    bad = machine.handle_request(tx_rpc.TYPE_TX_STATUS, [b"no spaces allowed"])
    assert bad is not None
    with pytest.raises(TopicError):
        tx_rpc.decode_status_response(bad)


def test_record_ids_of_a_commit_are_its_index_and_store_order(
    log: TxLog, machine: TopicStateMachine
) -> None:
    log.create("a")
    log.begin("t")
    for n in range(3):
        log.put("t", *(Record("a", bytes([n, k])) for k in range(2)))
    commit = log.commit("t")
    log.apply(machine)
    result = read(machine, "a", from_index=commit, from_position=3)
    assert [r.id for r in result.records] == [RecordId(commit, 3), RecordId(commit, 4),
                                              RecordId(commit, 5)]
    assert values(result) == [bytes([1, 1]), bytes([2, 0]), bytes([2, 1])]


def test_ended_transactions_do_not_pile_up_in_memory(
    log: TxLog, machine: TopicStateMachine
) -> None:
    log.create("a")
    for n in range(3000):
        log.begin(f"t{n}", timeout_ms=900_000)
        log.rollback(f"t{n}")
    log.begin("last", timeout_ms=1)
    log.apply(machine)
    assert len(machine._tx._deadlines) <= 1024 + 2
    assert machine.next_expiry() == log.now + 1


def test_a_page_of_a_large_commit_reads_only_the_stores_it_touches(
    log: TxLog, machine: TopicStateMachine, monkeypatch: pytest.MonkeyPatch
) -> None:
    log.create("a")
    log.begin("t")
    stores = [log.put("t", *(Record("a", b"%d-%d" % (n, k)) for k in range(2))) for n in range(5)]
    commit = log.commit("t")
    log.apply(machine)
    reader = machine._reader
    asked: list[int] = []
    original = reader.store_at

    def counting(index: int) -> object:
        asked.append(index)
        return original(index)

    monkeypatch.setattr(reader, "store_at", counting)
    page = read(machine, "a", from_index=commit, from_position=8, limit=1)
    assert values(page) == [b"4-0"] and page.more
    assert asked == [stores[4]]


def test_counts_list_the_commits_of_a_range_with_their_stores(
    log: TxLog, machine: TopicStateMachine
) -> None:
    """Issue #31: one ``TC`` answer resolves every commit of a range (a reader needs no
    ``TR`` round trip per commit); aborted and rolled-back ones are not listed, and the wire
    form round-trips."""
    log.create("a")
    log.create("b")
    log.create("c")
    log.begin("x")
    s1 = log.put("x", Record("a", b"1"), Record("b", b"2"))
    log.begin("y")
    s2 = log.put("x", Record("a", b"3"))
    log.put("y", Record("a", b"4"))
    cx = log.commit("x")
    log.rollback("y")
    log.begin("z")
    log.put("z", Record("b", b"5"))
    log.add(encode_command(TopicCommand("delete", "b")))
    cz = log.commit("z")  # aborted: b is gone
    log.apply(machine)
    last = log.store.last_index
    req = topic_counts.CountsRequest(1, last, last, commits=True)
    result = machine.counts(
        topic_counts.decode_counts_request(topic_counts.encode_counts_request(req))
    )
    assert result.commits == ((cx, ((s1, 2), (s2, 1))),) and result.commits_to == last
    assert cz > cx
    wire = topic_counts.encode_counts_response(result)
    assert topic_counts.decode_counts_response(wire) == result
    plain = machine.counts(topic_counts.CountsRequest(1, last, last))
    assert plain.commits is None
    assert topic_counts.decode_counts_response(topic_counts.encode_counts_response(plain)) == plain
    of_a = machine.counts(topic_counts.CountsRequest(1, last, last, ("a",), commits=True))
    assert of_a.commits == result.commits  # the commit made records of a visible
    of_c = machine.counts(topic_counts.CountsRequest(1, last, last, ("c",), commits=True))
    assert of_c.commits == ()  # a reader of c does not learn of other topics' commits
    only_first = machine.counts(topic_counts.CountsRequest(1, cx - 1, 1, commits=True))
    assert only_first.commits == ()


def test_a_long_commit_list_is_cut_and_says_where(
    log: TxLog, machine: TopicStateMachine, monkeypatch: pytest.MonkeyPatch
) -> None:
    log.create("a")
    commits = []
    for txid in ("x", "y"):
        log.begin(txid)
        log.put(txid, Record("a", b"1"))
        log.put(txid, Record("a", b"2"))
        commits.append(log.commit(txid))
    log.apply(machine)
    monkeypatch.setattr(topic_counts, "MAX_COMMIT_STORES", 3)
    last = log.store.last_index
    result = machine.counts(topic_counts.CountsRequest(1, last, last, commits=True))
    assert [index for index, _ in result.commits or ()] == commits[:1]
    assert result.commits_to == commits[1] - 1
