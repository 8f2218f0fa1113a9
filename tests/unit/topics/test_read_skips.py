"""Reads pass over a bounded number of records they must not answer (``SkipBudget``:
superseded copies of a compacted topic, TTL-expired records) and say where they stopped;
the peer goes on with such a read on later passes (``ContinuedReads``) instead of holding
its loop for the whole walk or answering "nothing"."""

from __future__ import annotations

import random

import pytest
from machine_log import Log

from raftlog.rpc.messages import ClientDispatch
from raftlog.server.continued_reads import MAX_CONTINUED, ContinuedReads
from raftlog.topics import compacted, reads, wire_fetch, wire_kv
from raftlog.topics import wire as rpc
from raftlog.topics.machine import TopicStateMachine
from raftlog.topics.records import Record, RecordId


def copies_then_live(log: Log) -> list[RecordId]:
    """A compacted topic: one key written 300 times, then two live keys; and a plain topic:
    300 records whose TTL ran out, then a live one. The ids of the live records, in order."""
    log.create("c", cleanup_policy="compact")
    log.create("t", retention_ms=600_000)
    for n in range(3):
        log.publish(*[Record("c", b"%d" % n, b"again") for _ in range(100)])
        log.publish(*[Record("t", b"brief", ttl_ms=10)] * 100)
    log.tick(log.now + 100)
    last_copy = log.publish(Record("c", b"final", b"again"), Record("c", b"b", b"other"))
    kept = log.publish(Record("t", b"kept"))
    return [RecordId(last_copy, 0), RecordId(last_copy, 1), RecordId(kept, 0)]


def ask(machine: TopicStateMachine, message: ClientDispatch) -> list[bytes]:
    answer = machine.handle_request(message.type, list(message.args))
    assert answer is not None
    return answer


def read_message(topic: str, **kwargs: object) -> ClientDispatch:
    req = rpc.ReadRequest(topic, **kwargs)  # type: ignore[arg-type]
    return ClientDispatch(rpc.TYPE_READ, tuple(rpc.encode_read_request(req)))


def test_a_read_passes_over_a_bounded_number_and_says_where(
    log: Log, machine: TopicStateMachine, monkeypatch: pytest.MonkeyPatch
) -> None:
    live = copies_then_live(log)
    log.apply(machine)
    for topic, first in (("c", live[0]), ("t", live[2])):
        monkeypatch.setattr(reads, "SKIP_SCAN", 50, raising=False)
        result = rpc.decode_read_response(ask(machine, read_message(topic)))  # through the wire
        assert result.records == () and result.more, topic
        assert result.resume_at is not None and result.resume_at < first
        monkeypatch.setattr(reads, "SKIP_SCAN", 10**9, raising=False)
        assert machine.read(rpc.ReadRequest(topic)).records[0].id == first  # none before


@pytest.mark.parametrize("seed", range(4))
def test_going_on_where_reads_stop_reads_what_one_unbounded_read_does(
    log: Log, machine: TopicStateMachine, monkeypatch: pytest.MonkeyPatch, seed: int
) -> None:
    rng = random.Random(seed)
    log.create("c", cleanup_policy="compact", tombstone_retention_ms=500)
    log.create("t", retention_ms=600_000)
    keys = [b"k%d" % n for n in range(6)]
    for _ in range(120):
        if rng.random() < 0.5:
            log.publish(*[Record("c", b"v", rng.choice(keys)) for _ in range(rng.randint(1, 9))])
        else:
            log.publish(*[Record("t", b"v", ttl_ms=rng.choice([None, 20, 5_000]))
                          for _ in range(rng.randint(1, 9))])
        if rng.random() < 0.1:
            log.tick(log.now + rng.randint(1, 300))
    log.apply(machine)
    for topic in ("c", "t"):
        monkeypatch.setattr(reads, "SKIP_SCAN", 10**9, raising=False)
        whole = machine.read(rpc.ReadRequest(topic)).records
        monkeypatch.setattr(reads, "SKIP_SCAN", rng.randint(1, 7), raising=False)
        got: list[rpc.LoggedRecord] = []
        req = rpc.ReadRequest(topic, limit=rng.randint(1, 5))
        for _ in range(10_000):
            result = machine.read(req)
            got.extend(result.records)
            if not result.more:
                break
            at = result.records[-1].id if result.records else result.resume_at
            assert at is not None
            inclusive = not result.records
            req = rpc.ReadRequest(topic, from_index=at.index, from_position=at.position,
                                  inclusive=inclusive, limit=req.limit)
        assert got == list(whole), topic


def test_the_peer_goes_on_with_a_stopped_read_until_it_finds_records(
    log: Log, machine: TopicStateMachine, monkeypatch: pytest.MonkeyPatch
) -> None:
    live = copies_then_live(log)
    log.apply(machine)
    monkeypatch.setattr(reads, "SKIP_SCAN", 40, raising=False)
    answered: list[tuple[bytes, bytes, list[bytes]]] = []

    def answer(routing: bytes, msg_id: bytes, message: ClientDispatch) -> None:
        frames = ask(machine, message)
        if not continued.offer(routing, msg_id, message, frames):
            answered.append((routing, msg_id, frames))

    continued = ContinuedReads(answer)
    fetch = wire_fetch.FetchRequest(rpc.ReadRequest("t", wait_ms=0), min_records=1)
    asks = [
        (b"r1", b"1", read_message("c")),
        (b"r2", b"1", ClientDispatch(wire_fetch.TYPE_FETCH,
                                     tuple(wire_fetch.encode_fetch_request(fetch)))),
    ]
    for routing, msg_id, message in asks:
        answer(routing, msg_id, message)
    assert answered == [] and len(continued) == 2
    assert continued.holds(b"r1", b"1") and not continued.holds(b"r1", b"2")  # resends dropped
    passes = 0
    while len(continued) and passes < 100:
        continued.run()
        passes += 1
    assert len(continued) == 0 and len(answered) == 2
    by_client = {routing: rpc.decode_read_response(frames) for routing, _, frames in answered}
    assert [r.id for r in by_client[b"r1"].records] == live[:2]
    assert [r.id for r in by_client[b"r2"].records] == live[2:]
    # a read with records goes as it is; a full queue answers as it is
    found = ask(machine, read_message("t", from_index=live[2].index))
    assert not continued.offer(b"r3", b"1", read_message("t"), found)
    monkeypatch.setattr("raftlog.server.continued_reads.MAX_CONTINUED", 0)
    stopped = ask(machine, read_message("c"))
    assert not continued.offer(b"r4", b"1", read_message("c"), stopped)
    assert MAX_CONTINUED > 0


def test_key_listings_pass_over_a_bounded_number_of_dead_keys(
    log: Log, machine: TopicStateMachine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``KK`` walked every deleted or expired key (they stay until log compaction) in one
    pass; now it stops after ``KEY_SKIPS`` and the peer goes on after the last one."""
    log.create("c", cleanup_policy="compact")
    log.publish(*[Record("c", b"v", b"a%03d" % n) for n in range(300)])
    log.publish(*[Record("c", b"", b"a%03d" % n, tombstone=True) for n in range(300)])
    log.publish(Record("c", b"v", b"b1"), Record("c", b"v", b"b2"))
    log.apply(machine)
    monkeypatch.setattr(compacted, "KEY_SKIPS", 40)
    message = ClientDispatch(
        wire_kv.TYPE_KV_KEYS, tuple(wire_kv.encode_keys_request(wire_kv.KeysRequest("c")))
    )
    stopped = wire_kv.decode_keys_response(ask(machine, message))
    assert stopped.keys == () and stopped.more and stopped.resume_after == b"a039"
    answered: list[list[bytes]] = []

    def answer(routing: bytes, msg_id: bytes, again: ClientDispatch) -> None:
        frames = ask(machine, again)
        if not continued.offer(routing, msg_id, again, frames):
            answered.append(frames)

    continued = ContinuedReads(answer)
    answer(b"r", b"1", message)
    while len(continued):
        continued.run()
    listed = wire_kv.decode_keys_response(answered[0])
    assert [key for key, _ in listed.keys] == [b"b1", b"b2"] and not listed.more


def test_one_client_holds_a_bounded_share_of_the_continued_reads(
    log: Log, machine: TopicStateMachine, monkeypatch: pytest.MonkeyPatch
) -> None:
    copies_then_live(log)
    log.apply(machine)
    monkeypatch.setattr(reads, "SKIP_SCAN", 40, raising=False)
    monkeypatch.setattr("raftlog.server.continued_reads.MAX_PER_CLIENT", 3)
    continued = ContinuedReads(lambda routing, msg_id, message: None)
    stopped = ask(machine, read_message("c"))
    taken = [continued.offer(b"flood", b"%d" % n, read_message("c"), stopped) for n in range(5)]
    assert taken == [True, True, True, False, False]
    assert continued.offer(b"other", b"1", read_message("c"), stopped)
    continued.run()  # the answer function answers nothing: each went once
    assert len(continued) == 0
    assert continued.offer(b"flood", b"9", read_message("c"), stopped)  # its places are free
