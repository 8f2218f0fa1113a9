"""Waiting ``TR`` reads held by the peer (issue #25 finding 5, the topic follow) and the
apply notification that wakes them."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from raftlog.errors import TopicError
from raftlog.rpc.frames import TRUE_FRAME
from raftlog.rpc.messages import ClientDispatch, ClientDispatchResponse
from raftlog.server import parked_reads
from raftlog.server.apply_signal import ApplySignal
from raftlog.server.parked_reads import ParkedReads, waiting_read
from raftlog.topics import wire as rpc


class Machine:
    """Answers every read with ``records`` record frames."""

    def __init__(self) -> None:
        self.records = 0
        self.reads = 0

    def handle_request(self, msg_type: bytes, args: Sequence[bytes]) -> list[bytes] | None:
        self.reads += 1
        return [TRUE_FRAME, b"meta", *([b"record"] * self.records)]


class Sent:
    def __init__(self) -> None:
        self.replies: list[tuple[bytes, bytes, object]] = []

    def reply(self, routing: bytes, msg_id: bytes, message: object) -> None:
        self.replies.append((routing, msg_id, message))


def read(wait: int, topic: str = "t") -> ClientDispatch:
    req = rpc.ReadRequest(topic, from_index=5, wait_ms=wait)
    return ClientDispatch(rpc.TYPE_READ, tuple(rpc.encode_read_request(req)))


def park(parked: ParkedReads, routing: bytes, wait: int, topic: str = "t") -> bool:
    message = read(wait, topic)
    request = waiting_read(message)
    assert request is not None
    return parked.park(routing, b"1", message, request)


def test_wait_is_sent_only_when_set_and_checked() -> None:
    assert b"wait" not in rpc.encode_read_request(rpc.ReadRequest("t"))[0]
    assert rpc.decode_read_request(rpc.encode_read_request(rpc.ReadRequest("t", wait_ms=250)))\
        .wait_ms == 250
    with pytest.raises(TopicError, match="wait"):
        rpc.ReadRequest("t", wait_ms=rpc.MAX_READ_WAIT_MS + 1)
    found = waiting_read(read(700))
    assert found is not None and found.wait_ms == 700
    assert waiting_read(ClientDispatch(rpc.TYPE_READ, (b"\xc1",))) is None  # malformed
    no_wait = rpc.encode_read_request(rpc.ReadRequest("t"))
    assert waiting_read(ClientDispatch(rpc.TYPE_READ, tuple(no_wait))) is None


def test_parked_reads_wait_for_a_record_or_the_deadline() -> None:
    now = [10.0]
    machine, sent = Machine(), Sent()
    parked = ParkedReads(machine, sent, clock=lambda: now[0])
    assert park(parked, b"a", 1000)
    assert park(parked, b"a", 1000)  # a resend replaces, never adds
    assert park(parked, b"b", 5000)
    assert len(parked) == 2
    parked.on_applied(7)  # applied, but nothing for these reads
    assert sent.replies == [] and len(parked) == 2
    now[0] = 11.5
    parked.sweep(now[0])  # a's wait ended: its (empty) answer; b still waits
    assert [r[0] for r in sent.replies] == [b"a"] and len(parked) == 1
    machine.records = 1
    parked.on_applied(8)
    assert [r[0] for r in sent.replies] == [b"a", b"b"] and len(parked) == 0
    answer = sent.replies[-1][2]
    assert isinstance(answer, ClientDispatchResponse) and answer.frames[-1] == b"record"
    reads = machine.reads
    parked.on_applied(9)  # nothing parked: nothing read
    assert machine.reads == reads


def test_at_most_max_parked_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(parked_reads, "MAX_PARKED", 2)
    parked = ParkedReads(Machine(), Sent())
    assert park(parked, b"a", 100) and park(parked, b"b", 100)
    assert not park(parked, b"c", 100)  # answered at once by the caller
    assert park(parked, b"a", 100)  # a resend of a parked one still fits


class Totals:
    def __init__(self) -> None:
        self.published_records = 0


def test_only_reads_of_topics_that_got_records_are_rerun() -> None:
    machine, sent = Machine(), Sent()
    totals = {"quiet": Totals(), "busy": Totals()}
    parked = ParkedReads(machine, sent, totals.get)
    for n in range(100):
        assert park(parked, b"f%d" % n, 5000, "quiet")
    for _ in range(50):  # another topic takes writes: the quiet followers cost no read
        totals["busy"].published_records += 1
        parked.on_applied(1)
    assert machine.reads == 0 and len(parked) == 100
    totals["quiet"].published_records += 1
    machine.records = 1
    parked.on_applied(2)
    assert machine.reads == 100 and len(sent.replies) == 100 and len(parked) == 0


async def test_apply_signal_wakes_waiters_and_listeners() -> None:
    signal = ApplySignal(3)
    heard: list[int] = []
    signal.listen(heard.append)
    assert await signal.wait_beyond(2, 0)  # already past
    assert not await signal.wait_beyond(3, 0.01)  # times out
    waiters = [asyncio.ensure_future(signal.wait_beyond(3, 5)) for _ in range(1000)]
    later = asyncio.ensure_future(signal.wait_beyond(4, 0.2))
    await asyncio.sleep(0.01)
    loop = asyncio.get_running_loop()
    await loop.run_in_executor(None, signal.notify, 4)  # from another thread, like the peer
    assert all(await asyncio.gather(*waiters))
    assert not await later  # 4 is not past 4
    assert heard == [4]


def test_one_pass_answers_at_most_the_wake_budget_the_next_timer_pass_goes_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(parked_reads, "WAKE_BUDGET", 100)
    machine, sent = Machine(), Sent()
    parked = ParkedReads(machine, sent, clock=lambda: 0.0)  # type: ignore[arg-type]
    for n in range(10):
        assert park(parked, b"c%d" % n, 10_000)
    machine.records = 8  # each answer ~55 bytes: two of them pass the budget of 100
    parked.on_applied(1)
    assert len(sent.replies) == 2 and len(parked) == 8  # past the budget: the pass stops
    parked.sweep(0.0)  # the next timer pass goes on, within the budget again
    assert len(sent.replies) == 4 and len(parked) == 6
    for _ in range(3):
        parked.sweep(0.0)
    assert len(sent.replies) == 10 and len(parked) == 0


def test_the_reads_of_a_client_leaving_answers_unread_are_dropped_unread() -> None:
    machine, sent = Machine(), Sent()
    parked = ParkedReads(machine, sent, unread_over_limit=lambda routing: routing == b"silent",
                         clock=lambda: 0.0)  # type: ignore[arg-type]
    assert park(parked, b"silent", 10_000) and park(parked, b"reader", 10_000)
    machine.records = 1
    parked.on_applied(1)
    assert [r[0] for r in sent.replies] == [b"reader"] and len(parked) == 0
    assert machine.reads == 1  # the silent client's read was not even read again


def test_one_pass_spends_at_most_the_wake_time_on_reads() -> None:
    """A wake-up answers a few bytes but may read a large record: the pass stops after the
    read that passes ``WAKE_TIME`` (at least one read a pass), the next timer pass goes on."""
    now = [0.0]

    class SlowMachine(Machine):
        def handle_request(self, msg_type: bytes, args: Sequence[bytes]) -> list[bytes] | None:
            now[0] += 0.015  # each read of the record takes 15 ms
            return super().handle_request(msg_type, args)

    machine, sent = SlowMachine(), Sent()
    parked = ParkedReads(machine, sent, clock=lambda: now[0])  # type: ignore[arg-type]
    for n in range(6):
        assert park(parked, b"c%d" % n, 10_000)
    machine.records = 1
    parked.on_applied(1)
    assert len(sent.replies) == 2 and machine.reads == 2  # 15 ms, then 30 ms > 20: stop
    parked.sweep(now[0])
    assert len(sent.replies) == 4 and len(parked) == 2
    parked.sweep(now[0])
    assert len(sent.replies) == 6 and len(parked) == 0
