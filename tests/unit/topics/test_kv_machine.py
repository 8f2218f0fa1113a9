"""Issue #29 on the topic state machine: conditional publishes decided at apply, compacted
topics (latest record per key, tombstones, reads, compaction, snapshots) and the key-value
answers ``KG``/``KK``; a property test checks the view against a plain replay."""

from __future__ import annotations

from pathlib import Path

import msgpack
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from machine_log import Log

from raftlog.errors import ExpectationFailedError, TopicError
from raftlog.server.quota_gate import record_count
from raftlog.statemachine.composite import CompositeStateMachine
from raftlog.storage.memory_snapshot import MemorySnapshotStore
from raftlog.topics import reads
from raftlog.topics import wire as rpc
from raftlog.topics import wire_kv as kv_rpc
from raftlog.topics.machine import TopicStateMachine
from raftlog.topics.records import (
    Expectation,
    Record,
    RecordBatch,
    RecordFormatError,
    RecordId,
    TopicCommand,
    check_property,
    encode_command,
)
from raftlog.topics.records_kv import NO_RECORD, encode_conditional, parse_record_id
from raftlog.topics.records_tx import (
    TxControl,
    decode_any_entry,
    encode_tx_control,
    encode_tx_store,
)
from raftlog.topics.stamp import stamp_append_time
from raftlog.topics.wire_errors import encode_error, error_from

DAY = 24 * 3600 * 1000


def put(log: Log, topic: str, key: bytes, value: bytes | None) -> int:
    """One keyed record (``None``: a tombstone) into ``topic``."""
    return log.publish(Record(topic, value or b"", key, tombstone=value is None))


def kv_get(m: TopicStateMachine, topic: str, key: bytes) -> bytes | None:
    frames = m.handle_request(kv_rpc.TYPE_KV_GET, kv_rpc.encode_get_request(topic, key))
    record = kv_rpc.decode_get_response(frames or []).record
    return None if record is None else record.record.value


def kv_keys(
    m: TopicStateMachine, topic: str, prefix: bytes = b"", limit: int = 1000
) -> list[bytes]:
    req = kv_rpc.KeysRequest(topic, prefix, None, limit)
    frames = m.handle_request(kv_rpc.TYPE_KV_KEYS, kv_rpc.encode_keys_request(req))
    return [key for key, _ in kv_rpc.decode_keys_response(frames or []).keys]


def live(m: TopicStateMachine, topic: str, **kw: object) -> list[tuple[bytes | None, bytes, bool]]:
    result = m.read(rpc.ReadRequest(topic, **kw))  # type: ignore[arg-type]
    return [(r.record.key, r.record.value, r.record.tombstone) for r in result.records]


def live_ids(m: TopicStateMachine, topic: str) -> list[RecordId]:
    return [r.id for r in m.read(rpc.ReadRequest(topic)).records]


# -- the format -------------------------------------------------------------------------------
def test_conditional_batches_and_tombstones_round_trip() -> None:
    expect = (Expectation("t", None), Expectation("t", RecordId(7, 2), b"k"))
    records = (Record("t", b"v", b"k"), Record("t", b"", b"gone", tombstone=True))
    entry = decode_any_entry(encode_conditional(records, expect))
    assert entry == RecordBatch(records, 0, 0, expect)
    assert encode_conditional(records, ())[5] == 1  # no expectation: a plain batch
    with pytest.raises(RecordFormatError, match="tombstone"):
        encode_conditional([Record("t", b"", None, tombstone=True)], ())
    assert parse_record_id("none") is NO_RECORD
    assert parse_record_id("12:3") == RecordId(12, 3) and parse_record_id("12") == RecordId(12, 0)
    assert check_property("cleanup_policy", "compact,delete") == "compact,delete"
    with pytest.raises(RecordFormatError, match="one of delete, compact"):
        check_property("cleanup_policy", "compacted")


def test_expectations_stay_on_the_batchs_topics_and_quotas_count_records() -> None:
    with pytest.raises(RecordFormatError, match="does not write to"):
        encode_conditional([Record("t", b"v")], [Expectation("secret", None)])
    data = encode_conditional([Record("t", b"1"), Record("t", b"2")], [Expectation("t", None)])
    assert record_count(data) == 2  # the per-principal record quota sees both


def test_the_refusal_names_the_current_last_id_on_the_wire() -> None:
    error = ExpectationFailedError("expected ...", "t", (5, 1))
    back = error_from(msgpack.unpackb(encode_error(error)[1]), 1)
    assert isinstance(back, ExpectationFailedError)
    assert (back.topic, back.current_last, back.name) == ("t", (5, 1), "ExpectationFailed")


# -- conditional publish ----------------------------------------------------------------------
def test_expected_last_id_and_empty_topic_are_decided_at_apply(
    log: Log, machine: TopicStateMachine
) -> None:
    log.create("t")
    first = log.publish(Record("t", b"opened"), expect=[Expectation("t", None)])
    again = log.publish(Record("t", b"again"), expect=[Expectation("t", None)])
    ok = log.publish(
        Record("t", b"a"), Record("t", b"b"), expect=[Expectation("t", RecordId(first, 0))]
    )
    stale = log.publish(Record("t", b"late"), expect=[Expectation("t", RecordId(first, 0))])
    log.apply(machine)
    assert [v for _, v, _ in live(machine, "t")] == [b"opened", b"a", b"b"]
    assert machine.refusal_at(first) is None and machine.refusal_at(ok) is None
    refused = machine.refusal_at(again)
    assert isinstance(refused, ExpectationFailedError) and refused.current_last == (first, 0)
    refused = machine.refusal_at(stale)
    assert isinstance(refused, ExpectationFailedError) and refused.current_last == (ok, 1)
    assert str(RecordId(ok, 1)) in refused.message


def test_racing_writers_at_one_expectation_in_one_apply_call(
    log: Log, machine: TopicStateMachine
) -> None:
    """N publishes at the same expectation land in the same apply call (the batch is not
    readable yet): exactly one applies."""
    log.create("t")
    log.apply(machine)
    racers = [
        log.publish(Record("t", b"%d" % n), expect=[Expectation("t", None)]) for n in range(5)
    ]
    log.apply(machine)
    assert [machine.refusal_at(i) is None for i in racers] == [True] + [False] * 4
    assert [v for _, v, _ in live(machine, "t")] == [b"0"]


def test_per_key_expectations_need_a_compacted_topic(log: Log, machine: TopicStateMachine) -> None:
    log.create("c", cleanup_policy="compact")
    log.create("plain")
    first = log.publish(Record("c", b"1", b"k"), expect=[Expectation("c", None, b"k")])
    dup = log.publish(Record("c", b"2", b"k"), expect=[Expectation("c", None, b"k")])
    cas = log.publish(Record("c", b"3", b"k"), expect=[Expectation("c", RecordId(first, 0), b"k")])
    other = log.publish(Record("c", b"x", b"other"), expect=[Expectation("c", None, b"other")])
    plain = log.publish(Record("plain", b"1", b"k"), expect=[Expectation("plain", None, b"k")])
    log.apply(machine)
    assert [machine.refusal_at(i) is None for i in (first, dup, cas, other)] == [
        True,
        False,
        True,
        True,
    ]
    refused = machine.refusal_at(plain)
    assert isinstance(refused, TopicError) and refused.name == "KeyExpectationUnsupported"
    assert kv_get(machine, "c", b"k") == b"3"


# -- compacted topics -------------------------------------------------------------------------
def test_a_compacted_topic_keeps_the_latest_record_per_key(
    log: Log, machine: TopicStateMachine
) -> None:
    log.create("c", cleanup_policy="compact", tombstone_retention_ms=1000)
    put(log, "c", b"a", b"1")
    put(log, "c", b"b", b"1")
    put(log, "c", b"a", b"2")
    put(log, "c", b"b", None)
    put(log, "c", b"ab", b"3")
    log.apply(machine)
    assert live(machine, "c") == [(b"a", b"2", False), (b"b", b"", True), (b"ab", b"3", False)]
    assert kv_get(machine, "c", b"a") == b"2" and kv_get(machine, "c", b"b") is None
    assert kv_keys(machine, "c") == [b"a", b"ab"] and kv_keys(machine, "c", b"ab") == [b"ab"]
    assert kv_keys(machine, "c", limit=1) == [b"a"]
    info = machine.describe("c")  # the first and last live records
    assert (info.first, info.last) == (live_ids(machine, "c")[0], live_ids(machine, "c")[-1])
    assert info.first is not None and info.first.index > machine.topics["c"].created_index + 1
    machine.kv.refresh_stats(machine.topics, machine.last_time, 0.0)
    assert machine.kv.stats == (("c", 2, len(b"a2") + len(b"ab3")),)  # the metrics' source
    log.tick(log.now + 1000)  # the tombstone's time is up
    log.apply(machine)
    assert live(machine, "c") == [(b"a", b"2", False), (b"ab", b"3", False)]
    # keyless records are refused; the policy cannot change
    bad = log.publish(Record("c", b"no key"))
    change = log.add(encode_command(TopicCommand("update", "c", {"cleanup_policy": "delete"})))
    log.apply(machine)
    refused = machine.refusal_at(bad)
    assert refused is not None and refused.name == "KeyRequired"
    assert machine.topics["c"].properties.cleanup_policy == "compact" and change
    # lifetimes may shrink, never grow (a purged tombstone cannot come back on one peer only)
    for ms in (2000, 500):
        log.add(encode_command(TopicCommand("update", "c", {"tombstone_retention_ms": ms})))
    log.add(encode_command(TopicCommand("update", "c", {"tombstone_retention_ms": None})))
    log.apply(machine)
    assert machine.topics["c"].properties.tombstone_retention_ms == 500


def test_compact_delete_expires_by_retention_too(log: Log, machine: TopicStateMachine) -> None:
    log.create("c", cleanup_policy="compact,delete", retention_ms=500)
    put(log, "c", b"a", b"1")
    log.apply(machine)
    assert kv_get(machine, "c", b"a") == b"1"
    log.tick(log.now + 500)
    log.apply(machine)
    assert kv_get(machine, "c", b"a") is None and live(machine, "c") == []


def test_non_compacted_topics_answer_no_kv(log: Log, machine: TopicStateMachine) -> None:
    log.create("plain")
    log.add(encode_command(TopicCommand("update", "plain", {"cleanup_policy": "delete"})))
    log.apply(machine)  # "delete" is what the unset policy means: not a change
    assert machine.topics["plain"].properties.cleanup_policy == "delete"
    with pytest.raises(TopicError, match="not compacted"):
        kv_get(machine, "plain", b"k")
    with pytest.raises(TopicError, match="does not exist"):
        kv_keys(machine, "missing")


def test_compacted_topics_do_not_pin_log_compaction(log: Log, machine: TopicStateMachine) -> None:
    log.create("c", cleanup_policy="compact")
    log.create("plain")
    put(log, "c", b"a", b"1")
    pinned = log.publish(Record("plain", b"kept"))
    put(log, "c", b"a", b"2")
    log.apply(machine)
    assert machine.compaction_limit() == pinned - 1
    log.add(encode_command(TopicCommand("delete", "plain")))
    log.apply(machine)
    assert machine.compaction_limit() == machine.last_applied


def _fill_compacted(log: Log) -> None:
    log.create("c", cleanup_policy="compact", tombstone_retention_ms=10 * DAY)
    for n in range(30):
        put(log, "c", b"k%d" % (n % 7), None if n % 5 == 4 else b"v%d" % n)


def dump(m: TopicStateMachine) -> tuple[object, ...]:
    keys = kv_keys(m, "c")
    return (
        live(m, "c"),
        keys,
        {k: kv_get(m, "c", k) for k in keys},
        m.kv.last_id("c", m.topics["c"]),
    )


def test_snapshot_restore_and_log_compaction_keep_the_view(log: Log, tmp_path: Path) -> None:
    _fill_compacted(log)
    original = TopicStateMachine(tmp_path / "orig", log.store)
    log.apply(original)
    cut = original.compaction_limit()
    assert cut == log.store.last_index  # nothing pinned
    data = CompositeStateMachine([original]).snapshot(cut)
    expected = dump(original)
    log.store.compact(cut, 1)
    original.on_timer(1e12)  # the clean-up drops superseded copies below the log's start
    assert dump(original) == expected
    original.close()
    snapshots = MemorySnapshotStore()
    snapshots.install(cut, 1, data)
    fresh = TopicStateMachine(tmp_path / "fresh", log.store)
    fresh.catch_up(snapshots, log.store.last_index)
    try:
        assert dump(fresh) == expected
        # both go on alike, conditional writes included
        rid = fresh.kv.last_id("c", fresh.topics["c"])
        log.publish(Record("c", b"after", b"k1"), expect=[Expectation("c", rid)])
        log.apply(fresh)
        assert kv_get(fresh, "c", b"k1") == b"after"
    finally:
        fresh.close()


ops = st.lists(
    st.tuples(
        st.sampled_from([b"a", b"b", b"ab", b"ba", b"c"]),
        st.one_of(st.none(), st.binary(max_size=3)),
    ),
    min_size=1,
    max_size=40,
)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(ops=ops, cut_at=st.floats(0, 1))
def test_the_kv_view_equals_a_replay_and_survives_a_snapshot(
    tmp_path_factory: pytest.TempPathFactory, ops: list[tuple[bytes, bytes | None]], cut_at: float
) -> None:
    base = tmp_path_factory.mktemp("kv")
    log = Log()
    log.create("c", cleanup_policy="compact", tombstone_retention_ms=10 * DAY)
    expected: dict[bytes, bytes] = {}
    for key, value in ops:
        put(log, "c", key, value)
        if value is None:
            expected.pop(key, None)
        else:
            expected[key] = value
    whole = TopicStateMachine(base / "whole", log.store)
    cut = max(1, int(cut_at * log.store.last_index))
    half = TopicStateMachine(base / "half", log.store)
    try:
        log.apply(whole)
        assert {k: kv_get(whole, "c", k) for k in kv_keys(whole, "c")} == expected
        assert sorted(kv_keys(whole, "c")) == sorted(expected)
        latest = {key: value for key, value in ops}  # reads: each key's last change, in order
        assert {k: (None if t else v) for k, v, t in live(whole, "c")} == latest
        # a peer restored from a snapshot at ``cut`` then applying the rest sees the same
        half.restore(cut, 1, whole.snapshot(cut))
        log.apply(half)
        assert dump(half) == dump(whole)
    finally:
        whole.close()
        half.close()


def test_a_transaction_commits_into_a_compacted_topic(log: Log, machine: TopicStateMachine) -> None:
    log.create("c", cleanup_policy="compact")
    put(log, "c", b"a", b"before")
    log.add(stamp_append_time(encode_tx_control(TxControl("begin", "t1", 60_000)), log.now))
    log.add(
        stamp_append_time(
            encode_tx_store("t1", [Record("c", b"in-tx", b"a"), Record("c", b"new", b"b")]),
            log.now,
        )
    )
    log.apply(machine)
    assert kv_get(machine, "c", b"a") == b"before"  # invisible until the commit
    commit = log.add(stamp_append_time(encode_tx_control(TxControl("commit", "t1")), log.now))
    log.apply(machine)
    assert (kv_get(machine, "c", b"a"), kv_get(machine, "c", b"b")) == (b"in-tx", b"new")
    assert [r.index for r in live_ids(machine, "c")] == [commit, commit]
    keyless = log.add(stamp_append_time(encode_tx_store("t2", [Record("c", b"x")]), log.now))
    log.apply(machine)
    refused = machine.refusal_at(keyless)
    assert refused is not None and refused.name in ("KeyRequired", "UnknownTransaction")


def test_a_restored_snapshot_knows_the_ttl_deadlines_of_its_compacted_records(
    log: Log, tmp_path: Path
) -> None:
    """A compacted topic's live records come with the snapshot, not the log: their TTL
    deadlines are registered at the restore, so the restored leader expires them on time."""
    log.create("c", cleanup_policy="compact")
    at = log.now
    log.publish(Record("c", b"brief", b"k1", ttl_ms=700), Record("c", b"kept", b"k2"))
    original = TopicStateMachine(tmp_path / "orig", log.store)
    log.apply(original)
    cut = original.compaction_limit()
    data = CompositeStateMachine([original]).snapshot(cut)
    original.close()
    log.store.compact(cut, 1)
    snapshots = MemorySnapshotStore()
    snapshots.install(cut, 1, data)
    fresh = TopicStateMachine(tmp_path / "fresh", log.store)
    fresh.catch_up(snapshots, log.store.last_index)
    try:
        assert kv_get(fresh, "c", b"k1") == b"brief"
        assert fresh.next_expiry() == at + 700
    finally:
        fresh.close()


def test_describe_of_a_compacted_topic_looks_at_a_bounded_number_of_copies(
    log: Log, machine: TopicStateMachine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``TD`` walked every live record of a compacted topic, and past every superseded copy
    (they stay until log compaction passes them): ~0.6 s of the loop per 100,000 for any
    reader, and every Kafka offset look-up asks it. Now each end looks at a bounded number
    of copies; beyond it the answer is a bound (first: no live record before it; last: none
    after it)."""
    log.create("c", cleanup_policy="compact", tombstone_retention_ms=1000)
    for n in range(300):
        put(log, "c", b"again", b"%d" % n)  # 299 superseded copies, then the live one
    put(log, "c", b"b", b"1")
    log.publish(*[Record("c", b"", b"gone", tombstone=True)] * 300)  # a remembered tombstone
    log.apply(machine)
    ids = live_ids(machine, "c")
    info = machine.describe("c")
    assert (info.first, info.last) == (ids[0], ids[-1])
    log.tick(log.now + 1000)  # the tombstones are forgotten: the last live record is b's
    log.apply(machine)
    ids = live_ids(machine, "c")
    assert machine.describe("c").last == ids[-1]
    copies = [0]
    index = machine._index
    for method in ("items", "items_backwards"):
        real = getattr(index, method, None)
        if real is None:  # the code before had no backwards scan
            continue

        def counted(*args: object, _real: object = real, **kwargs: object) -> object:
            for item in _real(*args, **kwargs):  # type: ignore[operator]
                copies[0] += 1
                yield item

        monkeypatch.setattr(index, method, counted)
    monkeypatch.setattr(reads, "SKIP_SCAN", 50, raising=False)
    bounded = machine.describe("c")
    assert copies[0] <= 2 * 50
    assert bounded.first is not None and bounded.first <= ids[0]
    assert bounded.last is not None and bounded.last >= ids[-1]
