"""Property test of the queue group rules (issue #27): for random sequences of leases, acks,
nacks, member crashes (leases left to run out on the log clock) and dead-letter moves, every
record ends acked exactly once or dead-lettered, and none is delivered more than
``max_deliveries`` times."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from hypothesis import example, given, settings
from hypothesis import strategies as st

from raftlog.topics.groups import table as table_module
from raftlog.topics.groups.entry import GroupCommand, check_command
from raftlog.topics.groups.table import GroupTable
from raftlog.topics.records import RecordId

RECORDS = 12
ACK_WAIT = 100
MEMBERS = ("a", "b", "c")


class ListSource:
    """Two topics, ``RECORDS`` records each (one per entry)."""

    def __init__(self) -> None:
        self.ids = {t: [RecordId(i, 0) for i in range(10, 10 + RECORDS)] for t in ("t1", "t2")}

    def topic_names(self) -> Iterable[str]:
        return self.ids.keys()

    def sorted_topic_names(self) -> list[str]:
        if getattr(self, "_sorted", None) is None:
            self._sorted = sorted(self.ids)
        return self._sorted

    def record_ids(self, topic: str, start: RecordId, limit: int) -> list[RecordId]:
        return [r for r in self.ids[topic] if r >= start][:limit]

    def start(self, topic: str) -> RecordId:
        return RecordId(0, 0)

    def end(self, topic: str) -> RecordId:
        return RecordId(10 + RECORDS, 0)


def command(op: str, args: dict[str, Any]) -> GroupCommand:
    return check_command(op, "g", args)


def open_records(table: GroupTable, source: ListSource) -> set[tuple[str, RecordId]]:
    group = table.groups["g"]
    out = set(group.leases) | set(group.waiting) | set(group.dead)
    for topic, ids in source.ids.items():
        cursor = group.cursors.get(topic, RecordId(0, 0))
        out |= {(topic, r) for r in ids if r >= cursor}
    return out


step = st.one_of(
    st.tuples(st.just("lease"), st.sampled_from(MEMBERS), st.integers(1, 6)),
    st.tuples(st.just("ack"), st.sampled_from(MEMBERS), st.integers(0, 6)),
    st.tuples(st.just("nack"), st.sampled_from(MEMBERS), st.integers(0, 6)),
    st.tuples(st.just("crash"), st.sampled_from(MEMBERS), st.just(0)),
    st.tuples(st.just("dead"), st.just(""), st.just(0)),
    st.tuples(st.just("tick"), st.just(""), st.sampled_from((1, 30, 60, ACK_WAIT, 150))),
)


@settings(max_examples=300, deadline=None)
@example(  # a late ack: the lease ran out, the record waits for redelivery
    steps=[("lease", "a", 1), ("tick", "", ACK_WAIT), ("ack", "a", 1)],
    max_deliveries=3, dead_letter=False, in_flight=5,
)
@given(steps=st.lists(step, max_size=60), max_deliveries=st.integers(1, 4),
       dead_letter=st.booleans(), in_flight=st.integers(1, 8))
def test_every_record_ends_acked_once_or_dead(
    steps: list[tuple[str, str, int]], max_deliveries: int, dead_letter: bool, in_flight: int
) -> None:
    source = ListSource()
    table = GroupTable()
    options: dict[str, Any] = {"ack_wait_ms": ACK_WAIT, "max_deliveries": max_deliveries,
                               "max_in_flight": in_flight}
    if dead_letter:
        options["dead_letter"] = "dlq"
    now, index = 1000, 1
    outcome: dict[tuple[str, RecordId], list[str]] = {}
    crashed: set[str] = set()
    ever: dict[str, set[tuple[str, RecordId]]] = {m: set() for m in MEMBERS}
    """What each member was ever handed: late acks and nacks name records whose lease ran
    out meanwhile (waiting, re-leased to another member, or already done)."""

    def run(op: str, args: dict[str, Any]) -> None:
        """Apply one command (``tick``: only the clock moves) and note every record that
        left the group: acked if the command acked it, dead-lettered otherwise."""
        nonlocal index
        index += 1
        before = open_records(table, source)
        stats_before = table.groups["g"].stats
        if op == "tick":
            table.expire(now)
        else:
            table.apply(index, command(op, args), now, source)
        group = table.groups["g"]
        for lease in group.leases.values():
            assert lease.deliveries <= max_deliveries
        ids = args.get("ids", []) if op == "ack" else []
        acked_ids = {(t, RecordId(i, p)) for t, i, p in ids}
        gone = before - open_records(table, source)
        for key in gone:
            outcome.setdefault(key, []).append("acked" if key in acked_ids else "dead")
        acked = sum(1 for key in gone if key in acked_ids)
        assert group.stats.acked - stats_before.acked == acked
        assert group.stats.dead_lettered - stats_before.dead_lettered == len(gone) - acked

    table.apply(1, command("create", {"mode": "queue", "topics": ["t1", "t2"],
                                      "options": options}), now, source)
    for op, member, n in steps:
        group = table.groups["g"]
        held = sorted(k for k, lease in group.leases.items() if lease.member == member)
        stale = sorted(ever.get(member, set()) - set(held))
        if op == "lease" and member not in crashed:
            run("lease", {"member": member, "max": n})
            group = table.groups["g"]
            ever[member] |= {k for k, lease in group.leases.items() if lease.member == member}
        elif op in ("ack", "nack") and (held or stale) and member not in crashed:
            chosen = held[:n] + stale[: max(0, n - len(held)) + (n % 2)] or held[:1] or stale[:1]
            ids = [[t, r.index, r.position] for t, r in chosen]
            run(op, {"member": member, "ids": ids, **({"reason": "x"} if op == "nack" else {})})
        elif op == "crash":
            crashed.add(member)  # it never acks again: its leases run out
        elif op == "dead" and group.dead:
            run("dead", {"ids": [[t, r.index, r.position] for t, r in sorted(group.dead)]})
        elif op == "tick":
            now += n
            run("tick", {})
    # drain: a healthy member takes and acks everything left
    for _ in range(RECORDS * 2 * (max_deliveries + 2)):
        group = table.groups["g"]
        if not open_records(table, source):
            break
        now += ACK_WAIT
        if group.dead:
            run("dead", {"ids": [[t, r.index, r.position] for t, r in sorted(group.dead)]})
        run("lease", {"member": "drain", "max": 6})
        group = table.groups["g"]
        held = sorted(k for k, lease in group.leases.items() if lease.member == "drain")
        if held:
            run("ack", {"member": "drain", "ids": [[t, r.index, r.position] for t, r in held]})
    assert not open_records(table, source)
    every = {(t, r) for t, ids in source.ids.items() for r in ids}
    assert set(outcome) == every
    assert all(len(kinds) == 1 for kinds in outcome.values()), outcome
    stats = table.groups["g"].stats
    assert stats.acked == sum(1 for k in outcome.values() if k == ["acked"])
    assert stats.acked + stats.dead_lettered == len(every)


@settings(max_examples=300, deadline=None)
@given(
    mine=st.lists(st.sampled_from(("a", "b", "ab", "ba", "c1", "c2", "zz")), max_size=5),
    pattern=st.one_of(st.none(), st.sampled_from(("a*", "c?", "*b", "[bz]*", "*"))),
    existing=st.sets(st.sampled_from(("a", "b", "ab", "ba", "c1", "c2", "zz", "q"))),
)
def test_resolved_is_every_existing_topic_the_group_matches(
    mine: list[str], pattern: str | None, existing: set[str]
) -> None:
    """A group of named topics looks each one up instead of matching every existing topic
    (an operation on it must not cost more with 50,000 topics); the result is the definition:
    the existing topics the group matches, in name order, each once."""
    table = GroupTable()
    options: dict[str, Any] = {"ack_wait_ms": ACK_WAIT}
    spec: dict[str, Any] = {"mode": "queue", "topics": mine, "options": options}
    if pattern is not None:
        spec["pattern"] = pattern
    if not mine and pattern is None:
        return  # a group names topics or a pattern (check_command refuses neither)
    table.apply(1, command("create", spec), 1000, ListSource())
    group = table.groups["g"]
    names = dict.fromkeys(existing).keys()
    assert group.resolved(names) == sorted(n for n in names if group.matches(n))


GROUPS = ("g1", "g2", "g3")
multi_step = st.tuples(
    st.sampled_from(("create", "delete", "lease", "nack", "ack", "dead", "tick")),
    st.sampled_from(GROUPS),
    st.sampled_from(MEMBERS),
    st.integers(1, 4),
)


@settings(max_examples=200, deadline=None)
@example(  # an ack of the earliest leases: the group's deadline moves later
    steps=[("create", "g1", "a", 1), ("lease", "g1", "a", 2), ("tick", "g1", "a", 1),
           ("lease", "g1", "a", 2), ("ack", "g1", "a", 2)],
    dead_letter=False,
)
@example(  # dead records, moved to the dead-letter topic; dead again, then deleted
    steps=[("create", "g2", "b", 1), *[("lease", "g2", "b", 1), ("nack", "g2", "b", 1)] * 2,
           ("dead", "g2", "b", 1), *[("lease", "g2", "b", 1), ("nack", "g2", "b", 1)] * 2,
           ("delete", "g2", "b", 1)],
    dead_letter=True,
)
@given(steps=st.lists(multi_step, max_size=50), dead_letter=st.booleans())
def test_kept_indexes_match_walking_every_group(
    steps: list[tuple[str, str, str, int]], dead_letter: bool
) -> None:
    """The table keeps, as it applies, each group's earliest lease deadline (a heap), the
    groups holding dead records and the names in order, so that no command and no timer pass
    walks every group. After every step of a random life of three groups -- created and
    deleted again, leases, acks, nacks up to dead, dead-letter moves, the clock passing
    deadlines -- they equal what walking every group gives; and a table rebuilt from the
    same groups (a restart, a snapshot restore) keeps the same."""
    source = ListSource()
    table = GroupTable()
    options: dict[str, Any] = {"ack_wait_ms": ACK_WAIT, "max_deliveries": 2}
    if dead_letter:
        options["dead_letter"] = "dlq"
    now, index = 1000, 1

    def check(table: GroupTable) -> None:
        groups = table.groups
        deadlines = [d for g in groups.values() if (d := g.next_deadline()) is not None]
        assert table.next_deadline == min(deadlines, default=None)
        assert table.with_dead == {name for name, g in groups.items() if g.dead}
        assert table.names.sorted(groups) == sorted(groups)

    for op, name, member, n in steps:
        index += 1
        group = table.groups.get(name)
        if op == "tick":
            now += n * 40
            table.expire(now)
        elif op == "create":
            spec = {"mode": "queue", "topics": ["t1", "t2"], "options": options}
            table.apply(index, check_command("create", name, spec), now, source)
        elif op == "delete":
            table.apply(index, check_command("delete", name, {}), now, source)
        elif op == "lease":
            table.apply(index, check_command(op, name, {"member": member, "max": n}), now, source)
        elif group is not None and group.leases and op in ("ack", "nack"):
            ids = [[t, r.index, r.position] for t, r in sorted(group.leases)[:n]]
            args = {"member": group.leases[min(group.leases)].member, "ids": ids}
            table.apply(index, check_command(op, name, args), now, source)
        elif group is not None and op == "dead" and group.dead:
            ids = [[t, r.index, r.position] for t, r in sorted(group.dead)]
            table.apply(index, check_command("dead", name, {"ids": ids}), now, source)
        check(table)
    rebuilt = GroupTable(table.groups)
    check(rebuilt)
    assert rebuilt.next_deadline == table.next_deadline


def test_a_group_command_touches_its_own_group_only(monkeypatch: Any) -> None:
    """With 500 groups, applying a commit, a lease and an ack -- and the clock passing a
    deadline -- asks for one group's earliest deadline each time, not every group's (which
    cost ~14 ms per group command applied, on every peer, at 20,000 groups)."""
    source = ListSource()
    table = GroupTable()
    options = {"ack_wait_ms": ACK_WAIT}
    for n in range(500):
        spec = {"mode": "queue", "topics": ["t1"], "options": options}
        table.apply(n + 1, check_command("create", f"q{n:03d}", spec), 1000, source)
    stream = {"mode": "stream", "topics": ["t1"], "options": options}
    table.apply(501, check_command("create", "s", stream), 1000, source)
    asked: list[str] = []
    real = table_module.Group.next_deadline

    def counted(group: Any) -> int | None:
        asked.append(group.name)
        return real(group)

    monkeypatch.setattr(table_module.Group, "next_deadline", counted)
    commit = {"topic": "t1", "next": [11, 0], "metadata": "", "member": "m"}
    table.apply(502, check_command("commit", "s", commit), 1000, source)
    table.apply(503, check_command("lease", "q007", {"member": "a", "max": 2}), 1000, source)
    lease = min(table.groups["q007"].leases)
    ack = {"member": "a", "ids": [[lease[0], lease[1].index, lease[1].position]]}
    table.apply(504, check_command("ack", "q007", ack), 1010, source)
    table.expire(1000 + ACK_WAIT)  # the other lease runs out
    assert asked == ["s", "q007", "q007", "q007"]
    assert table.next_deadline is None and len(table.groups["q007"].waiting) == 1


def test_a_pattern_groups_topics_are_matched_once_per_change_of_the_topic_set(
    monkeypatch: Any,
) -> None:
    """A group with a pattern resolves its topics by matching every existing topic; the
    table keeps the result until a topic comes or goes (a lease matched 50,000 topics, ~20 ms,
    every time). Leases without a change match nothing; after one, the new topic is leased."""
    source = ListSource()
    table = GroupTable()
    spec = {"mode": "queue", "topics": [], "pattern": "t*", "options": {"ack_wait_ms": ACK_WAIT}}
    table.apply(1, check_command("create", "p", spec), 1000, source)
    matched: list[str] = []
    real = table_module.Group.matches

    def counted(group: Any, topic: str) -> bool:
        matched.append(topic)
        return real(group, topic)

    monkeypatch.setattr(table_module.Group, "matches", counted)
    table.apply(2, check_command("lease", "p", {"member": "a", "max": 1}), 1000, source)
    assert sorted(matched) == ["t1", "t2"]
    matched.clear()
    for n in range(3, 6):
        table.apply(n, check_command("lease", "p", {"member": "a", "max": 1}), 1000, source)
    assert matched == []  # kept: the topic set did not change
    source.ids = {"t0": [RecordId(5, 0)], **source.ids}  # a topic comes: a new sorted list
    source._sorted = None
    table.apply(6, check_command("lease", "p", {"member": "b", "max": 1}), 1000, source)
    assert sorted(matched) == ["t0", "t1", "t2"]
    assert ("t0", RecordId(5, 0)) in table.groups["p"].leases  # the new topic, first in order
