"""``SnapshotBuild``: a snapshot built a step at a time while the machine applies more --
deleting and re-creating topics, writing compacted keys again, its index clean-up after a
log compaction -- has the bytes of the snapshot taken at once before any of it."""

from __future__ import annotations

import random

from machine_log import Log

from raftlog.topics.machine import TopicStateMachine
from raftlog.topics.records import Record, TopicCommand, encode_command

NAMES = [f"t{n}" for n in range(12)]


def some_entries(log: Log, rng: random.Random, count: int, keys: int = 5) -> None:
    for _ in range(count):
        name = rng.choice(NAMES)
        roll = rng.random()
        if roll < 0.65:
            log.publish(*[
                Record(name, b"v%d" % rng.randint(0, 9), key=b"k%d" % rng.randrange(keys))
                for _ in range(rng.randint(1, 4))
            ], auto=True)
        elif roll < 0.75:  # deletes: a tombstone, remembered for a while where compacted
            log.publish(Record(name, b"", b"k%d" % rng.randrange(keys), tombstone=True), auto=True)
        elif roll < 0.9:
            log.add(encode_command(TopicCommand("delete", name)))
            log.create(name, **rng.choice([{}, {"cleanup_policy": "compact"}]))
        else:
            log.tick(log.now + rng.randint(1, 3_000))


def filled(log: Log, machine: TopicStateMachine, rng: random.Random) -> None:
    for name in NAMES:
        log.create(name, **rng.choice([
            {}, {"cleanup_policy": "compact"}, {"cleanup_policy": "compact"},
            {"retention_ms": 5_000}, {"max_bytes": 100},
        ]))
    some_entries(log, rng, 150)
    log.apply(machine)


def test_a_build_in_steps_while_apply_goes_on_has_the_bytes_of_one_at_once(
    log: Log, machine: TopicStateMachine
) -> None:
    for seed in range(12):
        rng = random.Random(seed)
        filled(log, machine, rng)
        index = rng.randint(machine.last_applied // 2, machine.last_applied)
        expected = machine.snapshot(index)
        if rng.random() < 0.5:  # a log compaction whose clean-up has not run yet
            log.store.compact(rng.randint(log.store.first_index, index), 1)
        build = machine.snapshot_build(index)
        steps = 0
        while build.step(rng.randint(1, 25)) is None:
            steps += 1
            some_entries(log, rng, rng.randint(0, 6))
            log.apply(machine)
            machine.on_timer(1e12 + steps)  # the clean-up waits for the build
        assert build.data == expected, seed
        assert steps > 3
        machine.on_timer(2e12)


def test_a_restore_cancels_a_build(log: Log, machine: TopicStateMachine) -> None:
    rng = random.Random(1)
    filled(log, machine, rng)
    index = machine.last_applied
    data = machine.snapshot(index)
    build = machine.snapshot_build(index)
    assert build.step(5) is None
    machine.restore(index, 1, data)
    assert build.cancelled and build.step(5) is None
    assert machine.snapshot(index) == data
