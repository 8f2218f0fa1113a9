"""Transactions against a model (issue #18): random interleavings of begin, store, commit,
rollback, plain publishes and clock movement, applied to the topic machine, must show exactly
the records a straightforward model of the rules shows -- and a peer restored from a snapshot
at the machine's own compaction limit must end with the same visibility."""

from __future__ import annotations

from pathlib import Path
from tempfile import TemporaryDirectory

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_topic_machine import read
from test_topic_transactions import TxLog

from raftlog.statemachine.composite import CompositeStateMachine
from raftlog.storage.memory_snapshot import MemorySnapshotStore
from raftlog.topics.machine import TopicStateMachine
from raftlog.topics.records import Record

TXIDS = ("a", "b", "c")
TOPICS = ("x", "y")
Op = tuple[str, str, str, int, int]
"""(action, txid, topic, n, clock step ms)."""

OPS = st.lists(
    st.tuples(
        st.sampled_from(["begin", "store", "store", "store", "commit", "rollback", "plain"]),
        st.sampled_from(TXIDS),
        st.sampled_from(TOPICS),
        st.integers(1, 3),
        st.sampled_from([0, 0, 10, 100, 400]),
    ),
    min_size=1,
    max_size=40,
)
TIMEOUT_MS = 500


Seen = dict[str, list[tuple[int, int, bytes]]]


def _model(ops: list[Op], first_index: int, start_ms: int) -> tuple[Seen, set[str]]:
    """What every reader must see: per topic, (index, position, value) in log order; and
    which transactions are still open."""
    visible: dict[str, list[tuple[int, int, bytes]]] = {t: [] for t in TOPICS}
    open_: dict[str, tuple[int, list[Record]]] = {}
    clock = start_ms
    for index, (action, txid, topic, n, step) in enumerate(ops, start=first_index):
        clock += step
        for t in [t for t, (deadline, _) in open_.items() if deadline <= clock]:
            del open_[t]  # timed out by the log clock, before this entry applies
        if action == "plain":
            visible[topic].append((index, 0, b"p%d" % index))
        elif action == "begin":
            if txid not in open_:
                open_[txid] = (clock + TIMEOUT_MS, [])
        elif txid in open_:
            if action == "store":
                open_[txid][1].extend(Record(topic, b"s%d-%d" % (index, k)) for k in range(n))
            elif action == "commit":
                for k, record in enumerate(open_.pop(txid)[1]):
                    visible[record.topic].append((index, k, record.value))
            else:
                del open_[txid]
    return visible, set(open_)


def _append(log: TxLog, ops: list[Op]) -> None:
    for action, txid, topic, n, step in ops:
        log.now += step
        index = log.store.last_index + 1
        if action == "plain":
            log.publish(Record(topic, b"p%d" % index))
        elif action == "begin":
            log.begin(txid, TIMEOUT_MS)
        elif action == "store":
            log.put(txid, *(Record(topic, b"s%d-%d" % (index, k)) for k in range(n)))
        elif action == "commit":
            log.commit(txid)
        else:
            log.rollback(txid)


def _seen(machine: TopicStateMachine) -> Seen:
    return {
        t: [(r.id.index, r.id.position, r.record.value) for r in read(machine, t).records]
        for t in TOPICS
    }


@settings(
    max_examples=50,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(ops=OPS, cut=st.floats(0, 1))
def test_the_machine_and_a_restored_peer_show_what_the_model_shows(
    ops: list[Op], cut: float
) -> None:
    with TemporaryDirectory() as tmp:
        log = TxLog()
        log.create("x")
        log.create("y")
        first = log.store.last_index + 1
        start = log.now
        _append(log, ops)
        machine = TopicStateMachine(Path(tmp) / "m", log.store)
        # applied in two parts: reads in between must already agree with the model's prefix
        middle = first + int(len(ops) * cut)
        machine.apply(1, log.store.raw_entries(1, middle), 1)
        expected, still_open = _model(ops[: middle - first], first, start)
        assert _seen(machine) == expected
        assert set(machine._tx.open) == still_open
        log.apply(machine)
        expected, still_open = _model(ops, first, start)
        assert _seen(machine) == expected
        assert set(machine._tx.open) == still_open

        # a peer restored from a snapshot at the legal compaction point sees the same
        limit = machine.compaction_limit()
        assert limit <= machine.last_applied
        if limit >= 1:
            data = CompositeStateMachine([machine]).snapshot(limit)
            log.store.compact(limit, 1)
            snapshots = MemorySnapshotStore()
            snapshots.install(limit, 1, data)
            newcomer = TopicStateMachine(Path(tmp) / "n", log.store)
            try:
                newcomer.catch_up(snapshots, log.store.last_index)
                assert _seen(newcomer) == expected
                # the state future entries are decided on: the same open transactions
                assert {
                    t: (x.begin_index, x.deadline_ms, x.records, x.stores)
                    for t, x in newcomer._tx.open.items()
                } == {
                    t: (x.begin_index, x.deadline_ms, x.records, x.stores)
                    for t, x in machine._tx.open.items()
                }
            finally:
                newcomer.close()
        machine.close()
