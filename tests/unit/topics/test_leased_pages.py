"""``GQ`` answers and dead-letter publishes are bounded in bytes: a member may hold a
thousand leases of records up to 10 MiB, and one answer of them all stalled a peer's loop
for 4 s and could never be delivered (``raftlog.topics.groups.requests``). Each answer holds
at most ``LEASED_BUDGET`` of record bytes (a larger record alone), says whether more follow,
and the next one starts after a cursor; the client walks them."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from machine_log import Log

from raftlog.errors import TopicError
from raftlog.rpc.frames import decode_json, pack_json
from raftlog.topics.groups import wire
from raftlog.topics.groups.deadletter import BATCH_BYTES, DeadLetters
from raftlog.topics.groups.entry import GroupCommand
from raftlog.topics.groups.requests import GROUP_ANSWERS, LEASED_BUDGET
from raftlog.topics.machine import TopicStateMachine
from raftlog.topics.records import Record, RecordBatch, RecordId
from raftlog.topics.records_tx import decode_any_entry

MIB = 1024 * 1024
BIG = 3 * MIB // 2
"""Two of these fit one answer, a third does not."""


@pytest.fixture
def leases(tmp_path: Path, log: Log) -> Iterator[TopicStateMachine]:
    """Topics ``big`` (nine records of 1.5 MiB, then one of 5 MiB) and ``small`` (five of
    one byte), all leased to member ``m`` of queue group ``q``."""
    log.create("big")
    log.create("small")
    for n in range(9):
        log.publish(Record("big", bytes([n]) * BIG))
    log.publish(Record("big", b"h" * (5 * MIB)))
    log.publish(*(Record("small", bytes([n])) for n in range(5)))
    log.group("create", "q", {"mode": "queue", "topics": ["big", "small"]})
    log.group("lease", "q", {"member": "m", "max": 100})
    machine = TopicStateMachine(tmp_path / "m", log.store)
    log.apply(machine)
    yield machine
    machine.close()


def ask(machine: TopicStateMachine, **fields: object) -> wire.LeasedPage:
    request = wire.LeasedRequest("q", "m", **fields)  # type: ignore[arg-type]
    answer = GROUP_ANSWERS[wire.TYPE_GROUP_LEASED](machine, wire.encode_leased_request(request))
    return wire.decode_leased_response(answer)


def weight(page: wire.LeasedPage) -> int:
    return sum(x.item.record.size for x in page.records if x.item is not None)


def test_answers_walk_every_lease_once_in_order_within_the_budget(
    leases: TopicStateMachine,
) -> None:
    machine = leases
    pages, after = [], None
    while True:
        page = ask(machine, after=after)
        pages.append(page)
        assert page.records, "an answer always holds a lease while any follows the cursor"
        assert weight(page) <= LEASED_BUDGET or len(page.records) == 1, "over the budget"
        if not page.more:
            break
        after = (page.records[-1].topic, page.records[-1].id)
    keys = [(x.topic, x.id) for page in pages for x in page.records]
    assert keys == sorted(keys) and len(keys) == len(set(keys)) == 15
    assert [len(page.records) for page in pages] == [2, 2, 2, 2, 1, 1, 5]
    assert pages[5].records[0].item is not None
    assert pages[5].records[0].item.record.size == 5 * MIB  # larger than the budget: alone
    assert all(x.deliveries == 1 for page in pages for x in page.records)


def test_the_limit_the_topic_filter_and_a_cursor_past_the_end(leases: TopicStateMachine) -> None:
    machine = leases
    page = ask(machine, limit=1)
    assert len(page.records) == 1 and page.more
    small = ask(machine, topic="small")
    assert [x.id.position for x in small.records] == [0, 1, 2, 3, 4] and not small.more
    assert {x.topic for x in small.records} == {"small"}
    last = small.records[-1]
    assert ask(machine, after=(last.topic, last.id)) == wire.LeasedPage(
        machine.last_applied, [], False)


@pytest.mark.parametrize("after", [[1, 2, 3], ["big", -1, 0], ["big", 1], "big", ["big", 1, 2**40]])
def test_a_malformed_cursor_is_refused(leases: TopicStateMachine, after: object) -> None:
    frames = [pack_json({"group": "q", "member": "m", "after": after})]
    with pytest.raises(TopicError, match="after must be"):
        GROUP_ANSWERS[wire.TYPE_GROUP_LEASED](leases, frames)


def test_an_answer_without_more_from_an_older_peer_reads_as_complete() -> None:
    frames = wire.encode_leased_response(7, [])
    meta = decode_json(frames[1], 1)
    del meta["more"]
    page = wire.decode_leased_response([frames[0], pack_json(meta)])
    assert page == wire.LeasedPage(7, [], False)


def test_dead_letters_move_within_the_byte_budget(tmp_path: Path, log: Log) -> None:
    log.create("big")
    log.create("dlq")
    first = log.publish(Record("big", bytes([0]) * BIG))
    for n in range(1, 5):
        log.publish(Record("big", bytes([n]) * BIG))
    log.group("create", "q", {"mode": "queue", "topics": ["big"], "options": {
        "max_deliveries": 1, "dead_letter": "dlq"}})
    log.group("lease", "q", {"member": "m", "max": 5})
    ids = [["big", index, 0] for index in range(first, first + 5)]
    log.group("nack", "q", {"member": "m", "ids": ids})
    machine = TopicStateMachine(tmp_path / "d", log.store)
    log.apply(machine)
    assert len(machine.groups.table.groups["q"].dead) == 5
    proposed: list[bytes] = []

    def propose(_request_id: bytes, data: bytes) -> int:
        proposed.append(data)
        return 0

    DeadLetters(machine, propose, lambda: True, max_data=10 * MIB).on_timer()
    published = decode_any_entry(proposed[0])
    assert isinstance(published, RecordBatch)
    assert sum(len(r.value) for r in published.records) <= BATCH_BYTES
    assert [r.value[:1] for r in published.records] == [b"\x00", b"\x01"]  # in order
    done = decode_any_entry(proposed[1])
    assert isinstance(done, GroupCommand) and done.args["ids"] == ids[:2]
    machine.close()


def test_a_record_id_cursor_sorts_like_the_log() -> None:
    assert ("big", RecordId(2, 9)) < ("big", RecordId(3, 0)) < ("small", RecordId(1, 0))
