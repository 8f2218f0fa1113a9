"""``RouterLimits.take_run``: the drain's run of RequestUpdates (issue #28) keeps the limits of
``RouterLimits.receive`` -- the per-message limit (counted, logged, dropped) and the backlog
accounting per connection -- on a real ROUTER over loopback TCP."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import zmq
from server_fakes import EventRecorder, metrics

from raftlog.entry import REQUEST_ID_SIZE
from raftlog.options import RaftOptions
from raftlog.rpc.messages import TYPE_REQUEST_LOG_INFO, TYPE_REQUEST_UPDATE
from raftlog.server.backlog import FRAME_ALLOWANCE
from raftlog.server.router_limits import RUN_LENGTH, RouterLimits
from raftlog.transport import RunShape

IDENT = b"cluster"
SHAPE = RunShape(TYPE_REQUEST_UPDATE, IDENT, REQUEST_ID_SIZE, 100)


class Pair:
    def __init__(self) -> None:
        self.ctx = zmq.Context()
        self.router = self.ctx.socket(zmq.ROUTER)
        self.router.setsockopt(zmq.LINGER, 0)
        port = self.router.bind_to_random_port("tcp://127.0.0.1")
        self.dealer = self.ctx.socket(zmq.DEALER)
        self.dealer.setsockopt(zmq.LINGER, 0)
        self.dealer.connect(f"tcp://127.0.0.1:{port}")


@pytest.fixture
def pair() -> Iterator[Pair]:
    p = Pair()
    yield p
    p.router.close()
    p.dealer.close()
    p.ctx.term()


def _update(n: int) -> list[bytes]:
    return [b"%012d" % n, TYPE_REQUEST_UPDATE, IDENT, b"data %d" % n]


def test_a_run_queues_updates_drops_one_over_the_limit_and_stops_at_another_type(
    pair: Pair,
) -> None:
    peer_metrics, events = metrics(), EventRecorder()
    limits = RouterLimits(RaftOptions(), peer_metrics, events, owner="1")
    limits.message_limit = 200
    sent = [_update(1), _update(2), [b"x", b"?", b"y" * 300], _update(3)]
    sent += [[b"\x07", TYPE_REQUEST_LOG_INFO, IDENT], _update(4)]
    for message in sent:
        pair.dealer.send_multipart(message)
    queue: list[tuple[bytes, bytes, bytes]] = []
    runs: list[tuple[int, list[bytes] | None]] = []
    while sum(taken for taken, _ in runs) < len(sent):
        runs.append(limits.take_run(pair.router, SHAPE, queue))
        if runs[-1][0] == 0:
            assert pair.router.poll(10_000)
    ended = [frames for _, frames in runs if frames is not None]
    assert [data for _, _, data in queue] == [b"data 1", b"data 2", b"data 3", b"data 4"]
    assert [rid for _, rid, _ in queue] == [b"%012d" % n for n in (1, 2, 3, 4)]
    assert len(ended) == 1 and ended[0][1:] == sent[4]  # the RequestLogInfo, whole
    too_large = peer_metrics.messages_dropped.labels(reason="message_too_large")
    assert too_large.value == 1
    assert "message_too_large" in events.names()
    (told,) = limits.backlog.tally.values()
    assert told == sum(sum(map(len, m)) + FRAME_ALLOWANCE * (len(m) + 1) for m in sent)


def test_a_run_is_at_most_run_length_messages(pair: Pair) -> None:
    limits = RouterLimits(RaftOptions(), metrics(), EventRecorder(), owner="1")
    for n in range(RUN_LENGTH + 3):
        pair.dealer.send_multipart(_update(n))
    queue: list[tuple[bytes, bytes, bytes]] = []
    while len(queue) < RUN_LENGTH + 3:
        taken, frames = limits.take_run(pair.router, SHAPE, queue)
        assert taken <= RUN_LENGTH and frames is None
        if taken == 0:
            assert pair.router.poll(10_000)
    assert [data for _, _, data in queue] == [b"data %d" % n for n in range(RUN_LENGTH + 3)]
