"""``TC`` record counts: per-bucket counts from the topic index, the topic read rules
(unknown topics, retention, compaction, applied), and the frame codecs."""

from __future__ import annotations

import pytest
from machine_log import Log

from raftlog.errors import RemoteProtocolError
from raftlog.topics import wire_counts as tc
from raftlog.topics.machine import TopicStateMachine
from raftlog.topics.records import Record, TopicError


def counts(
    m: TopicStateMachine, lo: int, hi: int, step: int = 1, topics: list[str] | None = None
) -> tc.CountsResult:
    """Through the wire codecs, as a peer answers it."""
    req = tc.CountsRequest(lo, hi, step, None if topics is None else tuple(topics))
    answer = m.handle_request(tc.TYPE_COUNTS, tc.encode_counts_request(req))
    assert answer is not None
    return tc.decode_counts_response(answer)


def test_counts_per_bucket_match_the_log(log: Log, machine: TopicStateMachine) -> None:
    log.create("a")  # 1
    log.create("b")  # 2
    log.add(b"raw")  # 3
    log.publish(*[Record("a", b"x")] * 500)  # 4: 500 records of a
    log.publish(Record("a", b"x"), Record("b", b"y"), Record("b", b"z"))  # 5: mixed
    log.publish(Record("b", b"y"))  # 6
    log.apply(machine)

    every = counts(machine, 1, 6)
    assert every == tc.CountsResult(6, 1, (0, 0, 0, 1, 1, 1), (0, 0, 0, 500, 3, 1))
    assert counts(machine, 1, 6, 4) == tc.CountsResult(6, 1, (1, 2), (500, 4))
    only_b = counts(machine, 3, 6, 2, ["b"])
    assert only_b == tc.CountsResult(6, 1, (1, 2), (0, 3))
    # never beyond what this peer applied
    log.publish(Record("a", b"late"))
    late = counts(machine, 1, 7)
    assert late == tc.CountsResult(6, 1, (0, 0, 0, 1, 1, 1, 0), (0, 0, 0, 500, 3, 1, 0))


def test_counts_follow_the_topic_read_rules(log: Log, machine: TopicStateMachine) -> None:
    log.create("a", retention_ms=1000)  # 1
    log.publish(Record("a", b"old"), at=log.now - 5000)  # 2: expired
    log.publish(Record("a", b"new"), Record("a", b"new"))  # 3
    log.apply(machine)
    assert counts(machine, 1, 3).records == (0, 0, 2)
    answer = machine.handle_request(
        tc.TYPE_COUNTS, tc.encode_counts_request(tc.CountsRequest(1, 3, 1, ("nope",)))
    )
    assert answer is not None
    with pytest.raises(TopicError) as err:
        tc.decode_counts_response(answer)
    assert err.value.name == "UnknownTopic"


def test_compacted_entries_are_not_counted(log: Log, machine: TopicStateMachine) -> None:
    log.create("a")  # 1
    for _ in range(4):  # 2..5
        log.publish(Record("a", b"x"), Record("a", b"y"))
    log.apply(machine)
    log.store.compact(3, 1)
    result = counts(machine, 1, 5)
    assert result == tc.CountsResult(5, 4, (0, 0, 0, 1, 1), (0, 0, 0, 2, 2))


def test_requests_are_checked_and_answers_decoded_strictly() -> None:
    for bad in (
        dict(from_index=5, to_index=4),
        dict(from_index=0, to_index=10, step=0),
        dict(from_index=0, to_index=tc.MAX_BUCKETS, step=1),
        dict(from_index=-1, to_index=3),
    ):
        with pytest.raises(TopicError) as err:
            tc.CountsRequest(**bad)  # type: ignore[arg-type]
        assert err.value.name == "BadRequest"
    with pytest.raises(TopicError):
        tc.decode_counts_request([b"\x81\xa1x\x01"])  # {"x": 1}
    req = tc.CountsRequest(10, 99, 9, ("a", "b"))
    assert tc.decode_counts_request(tc.encode_counts_request(req)) == req
    with pytest.raises(RemoteProtocolError):
        tc.decode_counts_response([b"\x01", b"\x90"])  # a list, not a map
