"""``IndexCleanup``: the clean-up after a log compaction, done a slice a pass while entries
apply, leaves the index exactly as the clean-up in one pass does."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from test_snapshot_build import NAMES, some_entries
from test_topic_transactions import TxLog

from raftlog.topics import index_cleanup
from raftlog.topics.machine import TopicStateMachine
from raftlog.topics.records import Record, RecordId


def rows(machine: TopicStateMachine) -> list[tuple[bytes, bytes]]:
    return list(machine._index.items(b"\x00", b"\xff", "every row"))


@pytest.mark.parametrize("seed", range(4))
def test_the_clean_up_in_slices_leaves_what_one_pass_leaves(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, seed: int
) -> None:
    rng = random.Random(seed)
    log = TxLog()
    for name in NAMES:
        compacted = {"cleanup_policy": "compact", "tombstone_retention_ms": 1}
        log.create(name, **rng.choice([compacted, {"retention_ms": 50}]))
    log.create("dead", cleanup_policy="compact", tombstone_retention_ms=1)
    log.publish(*[Record("dead", b"v", b"z%d" % n) for n in range(20)])
    log.publish(*[Record("dead", b"", b"z%d" % n, tombstone=True) for n in range(10)])
    log.tick(log.now + 1_000)  # those tombstones are forgotten: their keys go at the clean-up
    log.publish(Record("dead", b"v", b"alive"))
    log.create("tx", retention_ms=50)
    for n in range(30):  # transactions ended below the floor: their rows go last
        log.begin(f"x{n}")
        log.put(f"x{n}", Record("tx", b"t"))
        (log.commit if n % 3 else log.rollback)(f"x{n}")
    some_entries(log, rng, 400, keys=60)
    whole = TopicStateMachine(tmp_path / "whole", log.store)
    sliced = TopicStateMachine(tmp_path / "sliced", log.store)
    try:
        log.apply(whole)
        log.apply(sliced)
        log.tick(log.now + 10_000)  # plain topics' records expire: the log may be compacted
        log.apply(whole)
        log.apply(sliced)
        floor = whole.compaction_limit()  # as far as the retained records allow
        assert floor > 20
        log.store.compact(floor, 1)
        before = len(rows(whole))
        whole.on_timer(1.0)  # in one pass
        assert len(rows(whole)) < before
        assert whole._cleanup.floor == floor + 1
        monkeypatch.setattr(index_cleanup, "WORK_PER_PASS", rng.randint(1, 12))
        passes = 0
        while sliced._cleanup.floor <= floor:
            passes += 1
            sliced.on_timer(float(passes))
            some_entries(log, rng, rng.randint(0, 3))  # apply goes on between the passes
            log.apply(whole)
            log.apply(sliced)
        assert passes > 2
        assert rows(sliced) == rows(whole)
        at = whole._index.time_at(floor)
        assert at is not None
        assert len(list(whole.kv.store.copies("dead", RecordId(0, 0), RecordId(floor, 0)))) == 11
        for name, state in whole.topics.items():  # what the clean-up of compacted topics left
            if not state.properties.compacted:
                continue
            below = list(whole.kv.store.copies(name, RecordId(0, 0), RecordId(floor + 1, 0)))
            keys = [key for _, key, _ in below]
            assert len(keys) == len(set(keys)), name  # no superseded copy below the floor
            for rid, key, _ in below:
                pointer = whole.kv.store.pointer(name, key)
                expired = pointer is not None and not pointer.live(state.properties, at[1])
                assert not (expired and pointer is not None and pointer.id == rid), (name, key)
    finally:
        whole.close()
        sliced.close()
