"""The retention schedule (``raftlog.topics.retention_schedule``): the next retention deadline
and the compaction floor kept per topic as applies happen, checked against walking every topic
(what the machine did before) over random logs, and the topic totals that rely on it against
a machine that advances every topic on every pass."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from machine_log import Log
from test_topic_counters import counts

from raftlog.storage.memory_snapshot import MemorySnapshotStore
from raftlog.topics import counters as counters_module
from raftlog.topics.keyed_heap import KeyedMinHeap
from raftlog.topics.machine import TopicStateMachine
from raftlog.topics.opening import open_topic_machine
from raftlog.topics.properties import TopicProperties
from raftlog.topics.records import Record, TopicCommand, encode_command
from raftlog.topics.retention_schedule import RetainedFloor
from raftlog.topics.state import TopicState

NAMES = [f"t{n}" for n in range(8)]


def test_keyed_min_heap_keeps_one_live_value_per_name() -> None:
    heap = KeyedMinHeap()
    assert heap.top() is None
    heap.set("a", 5)
    heap.set("b", 3)
    heap.lower("a", 7)  # not lower: kept at 5
    heap.lower("b", 1)
    assert heap.top() == (1, "b")
    heap.set("b", 9)  # raised: the pair (1, "b") goes stale
    assert heap.top() == (5, "a")
    heap.forget("a")
    assert heap.top() == (9, "b") and "a" not in heap and len(heap) == 1
    heap.clear()
    assert heap.top() is None and len(heap) == 0


def walked_deadline(machine: TopicStateMachine) -> int | None:
    """The next time-retention deadline over every topic: the walk the schedule replaced."""
    dues = [machine._retention_due_of(name) for name in machine.topics]
    return min((due for due in dues if due is not None), default=None)


def walked_floor(machine: TopicStateMachine) -> int | None:
    """The first retained index over every topic: the walk the schedule replaced."""
    firsts = [machine._first_retained_of(name) for name in machine.topics]
    return min((first for first in firsts if first is not None), default=None)


def check_schedule(machine: TopicStateMachine) -> None:
    """The floor is exact; the deadline is never later than the walk's (a late one would
    delay expiry) and always past the log clock; a deadline only earlier than the walk's
    (stale) is recomputed once the clock reaches it, so settling there moves it on."""
    walked = walked_floor(machine)
    assert machine._schedule.floor.lowest() == walked
    limit = machine.last_applied if walked is None else min(machine.last_applied, walked - 1)
    assert machine.compaction_limit() == limit  # no transaction here lowers it further
    clock = machine.last_time
    due = machine._schedule.deadlines.settle(clock)
    truth = walked_deadline(machine)
    if truth is not None:
        assert due is not None and due <= truth
    if due is not None:
        assert due > clock


def random_step(log: Log, rng: random.Random, alive: set[str]) -> None:
    """One random event of a topic's life: create with random retention, publish (some
    records with their own TTL), update the retention, delete, move the clock, compact."""
    roll = rng.random()
    name = rng.choice(NAMES)
    if roll < 0.15:
        props: dict[str, int | str | None] = {}
        if rng.random() < 0.7:
            props["retention_ms"] = rng.choice([50, 200, 1_000, 5_000])
        if rng.random() < 0.3:
            props["max_bytes"] = rng.choice([10, 40])
        if rng.random() < 0.15:
            props["cleanup_policy"] = "compact,delete"
        log.create(name, **props)
        alive.add(name)
    elif roll < 0.55 and alive:
        topic = rng.choice(sorted(alive))
        records = [
            Record(
                topic,
                b"v" * rng.randint(1, 9),
                key=b"k%d" % rng.randint(0, 3),
                ttl_ms=rng.choice([None, None, None, 30, 400]),
            )
            for _ in range(rng.randint(1, 3))
        ]
        log.publish(*records)
    elif roll < 0.65 and alive:
        change = {"retention_ms": rng.choice([None, 20, 300, 3_000])}
        log.add(encode_command(TopicCommand("update", rng.choice(sorted(alive)), change)))
    elif roll < 0.7 and alive:
        gone = rng.choice(sorted(alive))
        log.add(encode_command(TopicCommand("delete", gone)))
        alive.discard(gone)
    else:
        log.tick(log.now + rng.choice([1, 10, 60, 250, 1_200]))


@pytest.mark.parametrize("seed", range(6))
def test_schedule_answers_what_walking_every_topic_answers(tmp_path: Path, seed: int) -> None:
    """Random logs; after every applied step and timer pass the schedule's answers match the
    walks (``check_schedule``); midway the machine restores from a snapshot of another, and
    one is reopened from its index, so the resets are covered too. Each of the schedule's
    feeds (records applied, topics changed) left out fails here for some seed."""
    rng = random.Random(seed)
    log = Log()
    machine = TopicStateMachine(tmp_path / "m", log.store)
    alive: set[str] = set()
    try:
        for step in range(400):
            random_step(log, rng, alive)
            log.apply(machine)
            check_schedule(machine)
            if step % 7 == 0:
                machine.on_timer(float(step))
            if step == 150:
                target = machine.compaction_limit()
                if target > log.store.first_index:
                    log.store.compact(target, 1)
                check_schedule(machine)
            if step == 200:
                data = machine.snapshot(machine.last_applied)
                machine.close()
                machine = TopicStateMachine(tmp_path / f"restored{seed}", log.store)
                machine.restore(log.store.last_index, 1, data)
                check_schedule(machine)
            if step == 300:
                machine.close()
                machine = open_topic_machine(
                    tmp_path / f"restored{seed}", log.store, MemorySnapshotStore(), 0
                )
                check_schedule(machine)
    finally:
        machine.close()


def test_totals_follow_windows_moved_only_by_deadlines(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A topic with a time or size window is advanced only when its deadline passed, an
    event named it or compaction passed its cursor; its totals equal those of a machine
    advancing every topic every pass, over a random log compacted now and then. Without the
    deadlines' report (``retention_passed``) the expired counts lag here."""
    rng = random.Random(42)
    log = Log()
    fast = TopicStateMachine(tmp_path / "fast", log.store)
    slow = TopicStateMachine(tmp_path / "slow", log.store)
    alive: set[str] = set()
    looked_at = [0]
    real = counters_module._looked_at_again

    def counting(*args: object) -> bool:
        looked_at[0] += 1
        return real(*args)  # type: ignore[arg-type]

    try:
        for step in range(300):
            random_step(log, rng, alive)
            log.apply(fast)
            log.apply(slow)
            if step % 40 == 39:  # compaction may pass cursors (TTL'd records, empty topics)
                target = min(fast.compaction_limit(), slow.compaction_limit())
                if target >= log.store.first_index:
                    log.store.compact(target, 1)
            with monkeypatch.context() as patched:
                patched.setattr(counters_module, "_looked_at_again", counting)
                fast.on_timer(float(step))
            with monkeypatch.context() as patched:
                patched.setattr(counters_module, "_at_rest", lambda *args: False)
                patched.setattr(counters_module, "_looked_at_again", lambda *args: True)
                slow.on_timer(float(step))
            for name in alive:
                assert counts(fast, name) == counts(slow, name), (step, name)
        assert looked_at[0] > 0
        expired = sum(t.expired_records for n in alive if (t := fast.counters.get(n)))
        assert expired > 0  # the windows did move
    finally:
        fast.close()
        slow.close()


def test_periodic_looks_cost_what_moved_not_the_topic_count(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """600 topics with time retention, one record each; a second of the log clock expires
    the records of three. The leader's deadline look, the totals' pass and the compaction
    floor together read the index for those three and a few more -- not for every topic
    (they walked all 600, twice or more: ~1.3 s of the loop per second at 20,000 topics)."""
    log = Log()
    machine = TopicStateMachine(tmp_path / "m", log.store)
    try:
        for n in range(600):
            log.create(f"r{n:03d}", retention_ms=60_000)
        start = log.now
        first = log.publish(Record("r000", b"x"), at=start)
        for n in range(1, 600):
            log.publish(Record(f"r{n:03d}", b"x"), at=start + n * 100)
        log.tick(start + 60_000 + 50)  # record 0 expires
        log.apply(machine)
        machine.next_expiry(), machine.on_timer(0.0), machine.compaction_limit()  # resets
        reads = [0]
        index = machine._index
        real_entries = index.entries

        def counted(*args: object, **kwargs: object) -> object:
            reads[0] += 1
            return real_entries(*args, **kwargs)  # type: ignore[arg-type]

        monkeypatch.setattr(index, "entries", counted)
        log.tick(start + 60_000 + 300)  # records 1, 2 and 3 expire
        log.apply(machine)
        due = machine.next_expiry()
        machine.on_timer(1.0)
        floor = machine.compaction_limit()
        assert due == start + 60_000 + 400  # record 4 is next
        assert floor == first + 4 - 1  # just below record 4
        assert [counts(machine, f"r{n:03d}")[4] for n in range(6)] == [1, 1, 1, 1, 0, 0]
        assert 0 < reads[0] <= 30
    finally:
        machine.close()


def test_the_floor_looks_at_a_bounded_number_of_topics_a_call() -> None:
    """30,000 topics created at once were all recomputed by the next compaction-limit look
    (0.3-0.4 s of the loop). A look recomputes at most ``looks`` of them and answers the
    top's bound -- never above the exact floor -- and the next look goes on."""
    firsts = {f"t{n}": (None if n % 3 else 100 + n) for n in range(60)}
    asked: list[str] = []

    def first_of(name: str) -> int | None:
        asked.append(name)
        return firsts[name]

    floor = RetainedFloor(first_of)
    floor.reset({name: TopicState(TopicProperties(), n + 1) for n, name in enumerate(firsts)})
    exact = min(first for first in firsts.values() if first is not None)
    answers = []
    while not answers or answers[-1] != exact:
        asked.clear()
        answers.append(floor.lowest(looks=7))
        assert len(asked) <= 7
    assert all(answer is not None and answer <= exact for answer in answers)
    assert len(answers) > 3
