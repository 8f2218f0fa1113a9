"""Names in order and the names a filter matches (``raftlog.topics.names``): the same answer
as matching every name against every pattern, and a ``TL`` answer kept only until the topic
set changes."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st
from machine_log import Log

from raftlog.security.policy import TopicFilter
from raftlog.topics import wire as rpc
from raftlog.topics.machine import TopicStateMachine
from raftlog.topics.names import SortedNames
from raftlog.topics.records import Record, TopicCommand, encode_command
from raftlog.topics.requests import answer_request

WORDS = ("", "a", "ab", "abc", "b", "ba", "b.c", "pay.eu", "pay.us", "pay", "z")


@settings(max_examples=300, deadline=None)
@given(
    names=st.sets(st.sampled_from(WORDS[1:]) | st.text("abp.", min_size=1, max_size=4)),
    patterns=st.lists(
        st.sampled_from(WORDS).map(lambda w: w + "*") | st.sampled_from(WORDS[1:]), max_size=6
    ),
)
def test_matching_is_every_name_a_pattern_matches(names: set[str], patterns: list[str]) -> None:
    topics = dict.fromkeys(names)
    rule = TopicFilter.parse(patterns, "patterns")  # the ACL rule: names and 'prefix*'
    expected = sorted(n for n in names if rule.allows(n))
    assert SortedNames().matching(topics, patterns) == expected


def listed(machine: TopicStateMachine, patterns: list[str] | None = None) -> tuple[str, ...]:
    args = [] if patterns is None else [rpc.pack_json(patterns)]
    frames = answer_request(machine, rpc.TYPE_LIST, args)
    assert frames is not None
    return rpc.decode_list_response(frames)


def test_the_kept_answer_follows_creates_deletes_and_restores(
    log: Log, machine: TopicStateMachine, tmp_path: Path
) -> None:
    """``TL`` sorts and encodes the names once per change of the set: a create, an
    auto-create by a publish, a delete and a snapshot restore each show in the next
    answer; an update (the set unchanged) hands out the kept frames."""
    log.create("b")
    log.create("a")
    log.apply(machine)
    assert listed(machine) == ("a", "b")
    log.publish(Record("c", b"x"), auto=True)
    log.apply(machine)
    assert listed(machine) == ("a", "b", "c")
    assert listed(machine, ["a", "c*"]) == ("a", "c")
    log.add(encode_command(TopicCommand("delete", "a")))
    log.apply(machine)
    assert listed(machine) == ("b", "c")
    kept = machine.list_answer(None)
    log.add(encode_command(TopicCommand("update", "b", {"retention_ms": 5})))
    log.apply(machine)
    again = machine.list_answer(None)
    assert again == kept and again[1] is kept[1]  # not encoded again
    data = machine.snapshot(machine.last_applied)
    other = Log()
    other.create("q")
    restored = TopicStateMachine(tmp_path / "restored", other.store)
    try:
        other.apply(restored)
        assert listed(restored) == ("q",)
        restored.restore(machine.last_applied, 1, data)
        assert listed(restored) == ("b", "c")
    finally:
        restored.close()
