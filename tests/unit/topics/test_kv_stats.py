"""The compacted topics' live keys and bytes (the ``raftlog_kv_*`` metrics) are counted a
bounded slice per timer pass (``KeyValueState.refresh_stats``): every pass reads at most
``STATS_KEYS_PER_PASS`` keys however large the topics, each topic's count resumes where the
last pass stopped, and the published figures are complete counts."""

from __future__ import annotations

from pathlib import Path

from machine_log import Log

from raftlog.topics import compacted as compacted_module
from raftlog.topics import kv_state
from raftlog.topics.machine import TopicStateMachine
from raftlog.topics.records import Record, TopicCommand, encode_command


def fill(log: Log, topic: str, keys: int, value: bytes = b"v") -> None:
    for first in range(0, keys, 1_000):
        log.publish(*(Record(topic, value, key=b"k%d" % n)
                      for n in range(first, min(first + 1_000, keys))))


def test_counts_are_complete_and_each_pass_reads_a_bounded_slice(
    log: Log, machine: TopicStateMachine, monkeypatch: object
) -> None:
    log.create("big", cleanup_policy="compact")
    log.create("small", cleanup_policy="compact")
    log.create("plain")
    fill(log, "big", 5_000, b"vv")
    fill(log, "small", 3)
    log.publish(Record("small", b"", key=b"k0", tombstone=True))  # a tombstone: not live
    log.apply(machine)
    whole = tuple(  # one scan of everything (what every pass did before)
        (name, *machine.kv.store.stats(name, machine.topics[name].properties, machine.last_time))
        for name in ("big", "small")
    )
    assert [(name, keys) for name, keys, _ in whole] == [("big", 5_000), ("small", 2)]
    read = [0]
    real = compacted_module._unpack_pointer

    def counted(value: bytes) -> object:
        read[0] += 1
        return real(value)

    monkeypatch.setattr(compacted_module, "_unpack_pointer", counted)  # type: ignore[attr-defined]
    passes = 0
    while machine.kv.stats != whole:
        read[0] = 0
        machine.kv.refresh_stats(machine.topics, machine.last_time, float(passes))
        assert read[0] <= kv_state.STATS_KEYS_PER_PASS
        passes += 1
        assert passes <= 5
    assert passes >= 5_000 // kv_state.STATS_KEYS_PER_PASS  # never all in one pass
    read[0] = 0
    machine.kv.refresh_stats(machine.topics, machine.last_time, float(passes))
    assert read[0] == 0  # counted less than STATS_INTERVAL ago: not again yet


def test_a_recreated_topic_is_counted_from_its_first_key(
    log: Log, machine: TopicStateMachine, tmp_path: Path
) -> None:
    log.create("t", cleanup_policy="compact")
    fill(log, "t", 3_000)
    log.apply(machine)
    machine.kv.refresh_stats(machine.topics, machine.last_time, 0.0)  # a count in progress
    assert machine.kv.stats == ()
    log.add(encode_command(TopicCommand("delete", "t")))
    log.create("t", cleanup_policy="compact")
    fill(log, "t", 10)
    log.apply(machine)
    machine.kv.refresh_stats(machine.topics, machine.last_time, 1.0)
    assert machine.kv.stats == (("t", 10, sum(len(b"k%d" % n) + 1 for n in range(10))),)
