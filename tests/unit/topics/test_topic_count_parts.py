"""``TC`` counts in bounded parts (``raftlog.topics.counting``): no answer reads more than
its budget of index keys, the parts of a request sum to the one answer, and the client
asks for them and adds them up (``TopicClient.record_counts``)."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable, Iterator, Sequence
from typing import Any, cast

import pytest
from test_topic_transactions import TxLog

from raftlog.errors import RemoteProtocolError, TopicError
from raftlog.rpc.frames import decode_json, pack_json
from raftlog.topics import counting, reads
from raftlog.topics import wire_counts as tc
from raftlog.topics.client_read_calls import ReadCalls
from raftlog.topics.machine import TopicStateMachine
from raftlog.topics.records import Record
from raftlog.topics.wire_errors import encode_error


@pytest.fixture
def log() -> TxLog:
    return TxLog()


class CountingIndex:
    """The index as the walk sees it, counting every key it reads (and ``entry`` look-up)."""

    def __init__(self, index: counting.IndexKeys) -> None:
        self._index = index
        self.reads = 0

    def _counted(self, items: Iterator[Any]) -> Iterator[Any]:
        for item in items:
            self.reads += 1
            yield item

    def record_entries(self, lo: int, hi: int) -> Iterator[int]:
        return self._counted(self._index.record_entries(lo, hi))

    def record_counts(self, topic: str, lo: int, hi: int) -> Iterator[tuple[int, int]]:
        return self._counted(self._index.record_counts(topic, lo, hi))

    def commits_in(self, lo: int, hi: int) -> Iterator[tuple[int, list[tuple[int, int]]]]:
        return self._counted(self._index.commits_in(lo, hi))

    def entry(self, topic: str, index: int) -> object | None:
        self.reads += 1
        return self._index.entry(topic, index)


@pytest.fixture
def work(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """What each answer read: keys, and ``TOPIC_WORK`` per topic whose floors it found."""
    spent: list[int] = []
    real = counting.count_part

    def measured(req: tc.CountsRequest, index: Any, topics: Any, start: Any, position: Any,
                 *, budget: int) -> tc.CountsResult:
        keys = CountingIndex(index)
        starts = 0

        def start_counted(name: str, state: Any) -> int:
            nonlocal starts
            starts += 1
            found: int = start(name, state)
            return found

        try:
            return real(req, keys, topics, start_counted, position, budget=budget)
        finally:
            spent.append(keys.reads + counting.TOPIC_WORK * starts)

    monkeypatch.setattr(reads, "count_part", measured)
    return spent


def ask(machine: TopicStateMachine, req: tc.CountsRequest) -> tc.CountsResult:
    """Through the wire codecs, as a peer answers it."""
    answer = machine.handle_request(tc.TYPE_COUNTS, tc.encode_counts_request(req))
    assert answer is not None
    return tc.decode_counts_response(answer)


def in_parts(
    machine: TopicStateMachine, req: tc.CountsRequest, between: Callable[[], None] = lambda: None
) -> tuple[tc.CountsResult, int]:
    """The parts of ``req`` summed the way the client sums them, and how many there were."""
    partial = tc.CountsRequest(
        req.from_index, req.to_index, req.step, req.topics, req.commits, partial=True
    )
    counted, parts = ask(machine, partial), 1
    while counted.resume is not None:
        between()
        resumed = tc.CountsRequest(
            req.from_index, req.to_index, req.step, req.topics, req.commits, True, counted.resume
        )
        counted, parts = tc.merge_counts(counted, ask(machine, resumed)), parts + 1
    return counted, parts


def random_log(log: TxLog, rng: random.Random, topics: Sequence[str]) -> None:
    """Topics with and without windows, plain batches over several topics, raw entries,
    transactions committed and rolled back, and the clock moving."""
    for name in topics:
        props = rng.choice([{}, {"retention_ms": 5_000}, {"max_bytes": 60}, {}])
        log.create(name, **props)
    open_tx: list[str] = []
    for step in range(160):
        roll = rng.random()
        if roll < 0.55:
            chosen = rng.choices(topics, k=rng.randint(1, 5))
            log.publish(*[Record(t, b"v" * rng.randint(1, 20)) for t in chosen])
        elif roll < 0.62:
            log.add(b"raw")
        elif roll < 0.7:
            txid = f"tx{step}"
            log.begin(txid)
            open_tx.append(txid)
        elif roll < 0.85 and open_tx:
            log.put(rng.choice(open_tx), *[Record(rng.choice(topics), b"t")] * rng.randint(1, 3))
        elif roll < 0.95 and open_tx:
            txid = open_tx.pop(rng.randrange(len(open_tx)))
            (log.commit if rng.random() < 0.8 else log.rollback)(txid)
        else:
            log.tick(log.now + rng.randint(100, 3_000))


@pytest.mark.parametrize("seed", range(6))
def test_parts_sum_to_the_one_answer_and_each_stays_in_its_budget(
    log: TxLog, machine: TopicStateMachine, work: list[int], seed: int
) -> None:
    rng = random.Random(seed)
    topics = ["a", "b", "c", "d", "e", "f"]
    random_log(log, rng, topics)
    log.apply(machine)
    last = log.store.last_index
    for _ in range(25):
        lo = rng.randint(0, last + 1)
        hi = rng.randint(lo, last + 2)
        req = tc.CountsRequest(
            lo,
            hi,
            rng.randint(1, 12),
            None if rng.random() < 0.4 else tuple(rng.sample(topics, rng.randint(1, 4))),
            rng.random() < 0.5,
        )
        machine._reader.count_work = 10**9
        whole = ask(machine, req)
        assert whole.resume is None
        for budget in (counting.TOPIC_WORK + 1, 10, 17, 60):
            machine._reader.count_work = budget
            work.clear()
            summed, parts = in_parts(machine, req)
            assert summed == whole, (req, budget)
            assert max(work) <= budget + 1, (req, budget, work)  # +1: the key it stopped at
            if parts == 1:
                continue
            # without partial, counts over the budget are refused, never cut silently; a
            # commit list is cut where the answer says (commits_to), as before parts
            try:
                alone = ask(machine, req)
            except TopicError as refused:
                assert refused.name == "BadRequest" and "partial answers" in refused.message
                continue
            assert req.commits and whole.commits is not None
            assert (alone.records, alone.record_entries) == (whole.records, whole.record_entries)
            assert alone.commits_to < whole.commits_to
            assert alone.commits == tuple(c for c in whole.commits if c[0] <= alone.commits_to)


def test_a_long_range_is_counted_in_parts_of_the_default_budget(
    log: TxLog, machine: TopicStateMachine, work: list[int]
) -> None:
    """The hole: one answer for a whole range read every index key of it (~2.5 µs each on
    the loop: 0.5 s for 200,000 entries). Now each part reads at most ``COUNT_WORK``."""
    log.create("a")
    for _ in range(counting.COUNT_WORK + 2_000):
        log.publish(Record("a", b"x"))
    log.apply(machine)
    last = log.store.last_index
    summed, parts = in_parts(machine, tc.CountsRequest(1, last, 1_000, ("a",)))
    assert sum(summed.records) == sum(summed.record_entries) == counting.COUNT_WORK + 2_000
    assert parts >= 3 and max(work) <= counting.COUNT_WORK + 1
    with pytest.raises(TopicError, match="partial answers"):
        ask(machine, tc.CountsRequest(1, last, 1_000))


def test_every_topic_costs_its_floors_in_the_budget(
    log: TxLog, machine: TopicStateMachine, work: list[int]
) -> None:
    """"Every topic" found each topic's retention start in one answer: with tens of
    thousands of topics that alone held the loop; the floors count against the budget."""
    names = [f"t{n:05}" for n in range(counting.COUNT_WORK // counting.TOPIC_WORK + 300)]
    for name in names:
        log.create(name, retention_ms=60_000)
    log.publish(*[Record(name, b"x") for name in names[::50]])
    log.apply(machine)
    summed, parts = in_parts(machine, tc.CountsRequest(1, log.store.last_index, 10_000))
    assert summed.records[0] == len(names[::50]) and parts >= 2
    assert max(work) <= counting.COUNT_WORK + 1


def test_parts_count_one_range_while_the_log_grows_and_topics_go(
    log: TxLog, machine: TopicStateMachine
) -> None:
    """The first part fixes the last index counted; a topic deleted between the parts is
    left out of what is still to count; nothing is counted twice."""
    for name in ("a", "b", "c"):
        log.create(name)
    for n in range(40):
        log.publish(Record("abc"[n % 3], b"x"), Record("c", b"y"))
    log.apply(machine)
    first_applied = machine.last_applied
    req = tc.CountsRequest(1, 10**6, 10**6)
    machine._reader.count_work = 10**9
    whole = ask(machine, req)
    machine._reader.count_work = 12

    def more() -> None:
        log.publish(Record("a", b"late"), Record("c", b"late"))
        log.apply(machine)

    summed, parts = in_parts(machine, req, more)
    assert parts > 5 and summed == whole and summed.applied == first_applied
    assert machine.last_applied > first_applied


def test_malformed_cursors_are_bad_requests_and_any_cursor_costs_one_part(
    log: TxLog, machine: TopicStateMachine, work: list[int]
) -> None:
    log.create("a")
    for _ in range(50):
        log.publish(Record("a", b"x"))
    log.apply(machine)
    machine._reader.count_work = 20
    body = {"from_index": 1, "to_index": 60, "step": 1, "partial": True}
    for cursor in ([], [0, "", 1], [3, "", 0, 60], [1, 5, 0, 60], [1, "no\x00pe", 0, 60],
                   [0, "", -1, 60], [0, "", 0, 2.0**60], [0, "", 1.5, 60], "x", {"phase": 0}):
        frames = [pack_json({**body, "resume": cursor})]
        answer = machine.handle_request(tc.TYPE_COUNTS, frames)
        assert answer is not None
        with pytest.raises(TopicError) as bad:
            tc.decode_counts_response(answer)
        assert bad.value.name in ("BadRequest", "InvalidTopicName"), cursor
    without_partial = [pack_json({**body, "partial": False, "resume": [0, "", 0, 9]})]
    answer = machine.handle_request(tc.TYPE_COUNTS, without_partial)
    assert answer is not None
    with pytest.raises(TopicError, match="resume needs partial"):
        tc.decode_counts_response(answer)
    work.clear()
    rng = random.Random(7)
    for _ in range(200):  # a made-up cursor is answered within the budget, like any part
        made_up = tc.CountsCursor(rng.randint(0, 2), rng.choice(["", "a", "b", "zz"]),
                                  rng.randint(0, 70), rng.randint(0, 2**40))
        ask(machine, tc.CountsRequest(1, 60, rng.randint(1, 9), None, rng.random() < 0.5,
                                      True, made_up))
    assert max(work) <= 21


class PeerStub:
    """A ``ReadHost`` whose peer is a machine (or stands for an older or broken one)."""

    def __init__(self, answer: Callable[[list[bytes]], list[bytes]]) -> None:
        self.answer = answer
        self.asked: list[dict[str, Any]] = []

    async def request(self, url: str | None, kind: bytes, args: list[bytes],
                      *, timeout: float | None = None) -> list[bytes]:
        assert kind == tc.TYPE_COUNTS and len(self.asked) < 100, "asked forever"
        self.asked.append(cast(dict[str, Any], decode_json(args[0], 3)))
        return self.answer(args)


def client_counts(stub: PeerStub, *args: Any, **kwargs: Any) -> tc.CountsResult:
    counted: tc.CountsResult = asyncio.run(ReadCalls.record_counts(stub, *args, **kwargs))  # type: ignore[arg-type]
    return counted


def test_the_client_sums_the_parts_and_asks_an_older_peer_the_old_way(
    log: TxLog, machine: TopicStateMachine
) -> None:
    log.create("a")
    for _ in range(30):
        log.publish(Record("a", b"x"), Record("a", b"y"))
    log.apply(machine)

    def peer(args: list[bytes]) -> list[bytes]:
        answer = machine.handle_request(tc.TYPE_COUNTS, args)
        assert answer is not None
        return answer

    machine._reader.count_work = 10**9
    whole = ask(machine, tc.CountsRequest(1, 40, 7, commits=True))
    machine._reader.count_work = 10
    stub = PeerStub(peer)
    assert client_counts(stub, 1, 40, step=7, commits=True) == whole
    assert len(stub.asked) > 3 and all(body["partial"] for body in stub.asked)

    def older(args: list[bytes]) -> list[bytes]:
        body = cast(dict[str, Any], decode_json(args[0], 3))
        if "partial" in body:
            return encode_error(
                TopicError("BadRequest", "unknown counts request keys: ['partial']")
            )
        return peer(args)

    machine._reader.count_work = 10**9
    stub = PeerStub(older)
    assert client_counts(stub, 1, 40, step=7) == ask(machine, tc.CountsRequest(1, 40, 7))
    assert ["partial" in body for body in stub.asked] == [True, False]


def test_the_client_refuses_a_peer_that_does_not_move_on(
    log: TxLog, machine: TopicStateMachine
) -> None:
    stuck = tc.CountsResult(5, 1, (0,), (0,), None, 0, tc.CountsCursor(0, "", 3, 5))
    stub = PeerStub(lambda args: tc.encode_counts_response(stuck)[0:2])
    with pytest.raises(RemoteProtocolError, match="did not move on"):
        client_counts(stub, 1, 5, step=5)
    assert len(stub.asked) == 2


def test_commits_of_parts_are_complete_from_the_highest_first_index(
    log: TxLog, machine: TopicStateMachine
) -> None:
    """The log compacted between the parts: the summed answer's ``first_index`` is the
    highest a part saw, and its commits are complete from there to ``commits_to`` (a
    Spark commit map trusts that span)."""
    log.create("a")
    commits = []
    for n in range(30):
        log.begin(f"x{n}")
        log.put(f"x{n}", Record("a", b"v"))
        commits.append(log.commit(f"x{n}"))
    log.apply(machine)
    last = log.store.last_index
    machine._reader.count_work = 10

    def compact() -> None:
        if log.store.first_index < 40:
            log.store.compact(log.store.first_index + 9, 1)

    summed, parts = in_parts(machine, tc.CountsRequest(1, last, last, commits=True), compact)
    assert parts > 3 and summed.first_index == log.store.first_index > 40
    assert summed.commits is not None and summed.commits_to == last
    listed = [index for index, _ in summed.commits]
    assert listed == sorted(set(listed))
    assert set(listed) >= {c for c in commits if summed.first_index <= c <= last}
