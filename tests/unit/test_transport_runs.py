"""``take_run``: a run of RequestUpdates taken from the ROUTER without Python touching each one
(issue #28), compiled (raftlog/_speedups_transport.c) and pure (``transport.take_run_py``).

Both twins get the same generated message sequences on real ZeroMQ sockets over loopback TCP,
and what they do -- which messages are queued, which end a run and go to the general path,
with which frames and size, what the backlog tally is told -- must be the same for both
*and* what the general path would have done: a message is queued by a run exactly when the
codec decodes it as a RequestUpdate for this peer's ident, ``ClientService.request_update``
would queue it (its data within ``max_data``), and it has no frame after the data (such a
message is valid too, so it goes to the general path, which queues it). The peer's wrapper,
``RouterLimits.take_run``, must keep the per-message limit (counted, logged, dropped) and the
backlog accounting. Without the extension these tests skip, except under
``RAFTLOG_EXPECT_COMPILED=1`` (CI).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from typing import Any
from unittest.mock import Mock

import pytest
import zmq
from hypothesis import given, settings
from hypothesis import strategies as st
from zmq_pair import Pair

from raftlog import speedups, transport
from raftlog.entry import REQUEST_ID_SIZE
from raftlog.errors import RemoteProtocolError
from raftlog.metrics import PeerMetrics
from raftlog.options import RaftOptions
from raftlog.rpc.codec import decode_request_args
from raftlog.rpc.messages import TYPE_REQUEST_LOG_INFO, TYPE_REQUEST_UPDATE, RequestUpdate
from raftlog.server.backlog import FRAME_ALLOWANCE
from raftlog.server.router_limits import RUN_LENGTH, RouterLimits
from raftlog.transport import RunShape

pytestmark = pytest.mark.skipif(
    speedups.transport is None and os.environ.get("RAFTLOG_EXPECT_COMPILED") != "1",
    reason=f"the compiled twins are not in use here: {speedups.IMPLEMENTATION}",
)

IDENT = b"ident"
MAX_DATA = 40
SHAPE = RunShape(TYPE_REQUEST_UPDATE, IDENT, REQUEST_ID_SIZE, MAX_DATA)
TakeRun = Callable[..., tuple[int, Any]]
TWINS: dict[str, TakeRun] = {"pure": transport.take_run_py, "compiled": transport.take_run}
Event = tuple[Any, ...]


@pytest.fixture
def pair() -> Iterator[Pair]:
    p = Pair()
    yield p
    p.close()


def _take_all(
    take: TakeRun, p: Pair, count: int, limit: int, max_count: int
) -> tuple[list[Event], dict[int, int]]:
    """Every event of ``count`` messages, in order, however the runs fall: ("queued",
    routing, id, data) or ("odd", frames, size, too_large)."""
    events: list[Event] = []
    tally: dict[int, int] = {}
    taken = 0
    while taken < count:
        queue: list[tuple[bytes, bytes, bytes]] = []
        got, odd = take(
            p.router, limit, SHAPE, queue, tally, allowance=FRAME_ALLOWANCE, max_count=max_count
        )
        assert got <= max_count
        assert got == len(queue) + (odd is not None)
        events += [("queued", *item) for item in queue]
        if odd is not None:
            assert odd[3] in tally and odd[3] >= 0  # the connection it came from
            events.append(("odd", *odd[:3]))
        taken += got
        if got == 0:
            assert p.router.poll(10_000), "messages did not arrive"
    assert take(p.router, limit, SHAPE, [], tally, allowance=1, max_count=5) == (0, None)
    return events, tally


def _expected(message: list[bytes], limit: int) -> Event:
    """What the general path makes of ``message`` (the DEALER's frames), as an event."""
    size = sum(map(len, message))
    if size > limit:  # dropped; the general path needs only the routing id and message id
        return ("odd", None, size, True)
    frames = [b"routing", *message]
    queued = False
    if len(message) >= 4 and message[1] == TYPE_REQUEST_UPDATE and message[2] == IDENT:
        try:
            decoded = decode_request_args(message[1], message[0], message[3:])
        except RemoteProtocolError:
            decoded = None
        queued = isinstance(decoded, RequestUpdate) and len(decoded.data) <= MAX_DATA
    if queued and len(message) == 4:
        return ("queued", None, message[0], message[3])
    return ("odd", frames, size, False)


_update = st.tuples(
    st.sampled_from([REQUEST_ID_SIZE, REQUEST_ID_SIZE, REQUEST_ID_SIZE, 3, 13]).flatmap(
        lambda n: st.binary(min_size=n, max_size=n)
    ),
    st.sampled_from([TYPE_REQUEST_UPDATE] * 4 + [TYPE_REQUEST_LOG_INFO, b"", b"=="]),
    st.sampled_from([IDENT] * 4 + [b"other", b""]),
    st.one_of(  # empty, short, and either side of max_data
        st.binary(max_size=8),
        st.integers(MAX_DATA - 1, MAX_DATA + 1).flatmap(
            lambda n: st.binary(min_size=n, max_size=n)
        ),
    ),
    st.lists(st.binary(max_size=4), max_size=2),
).map(lambda t: [t[0], t[1], t[2], t[3], *t[4]])
messages_strategy = st.lists(
    st.one_of(_update, _update, st.lists(st.binary(max_size=30), min_size=1, max_size=6)),
    min_size=1,
    max_size=20,
)


@settings(max_examples=50, deadline=None)
@given(
    messages=messages_strategy,
    limit=st.sampled_from([10_000, 10_000, 60, 20]),
    max_count=st.integers(1, 7),
)
def test_both_twins_queue_what_the_general_path_would_and_hand_it_the_rest(
    messages: list[list[bytes]], limit: int, max_count: int
) -> None:
    p = Pair()
    try:
        results = []
        for take in TWINS.values():
            for message in messages:
                p.dealer.send_multipart(message)
            results.append(_take_all(take, p, len(messages), limit, max_count))
        (events, tally), (c_events, c_tally) = results
        assert events == c_events
        assert tally == c_tally
        (fd, told) = tally.popitem()
        assert fd > 0  # the TCP connection's descriptor
        assert told == sum(sum(map(len, m)) + FRAME_ALLOWANCE * (len(m) + 1) for m in messages)
        assert len(events) == len(messages)
        for event, message in zip(events, messages, strict=True):
            want = _expected(message, limit)
            if want[0] == "queued":
                assert event[0] == "queued" and event[2:] == want[2:]
                assert event[1]  # the routing id the ROUTER gave the DEALER
            elif want[3]:  # over the limit
                assert event[0] == "odd" and event[2:] == want[2:]
                kept = message[:1] if len(message[0]) <= limit else []
                assert event[1][1:] == kept  # the routing id, and the message id if kept
            else:
                assert event[0] == "odd" and event[1][1:] == want[1][1:]
                assert event[2:] == want[2:]
    finally:
        p.close()


def test_a_run_stops_at_max_count_and_the_rest_waits(pair: Pair) -> None:
    for n in range(5):
        pair.dealer.send_multipart([b"r" * REQUEST_ID_SIZE, TYPE_REQUEST_UPDATE, IDENT, b"%d" % n])
    assert pair.router.poll(10_000)
    for take, want in zip(TWINS.values(), ([b"0", b"1"], [b"2", b"3"]), strict=True):
        queue: list[tuple[bytes, bytes, bytes]] = []
        while len(queue) < 2:  # all five may not have arrived yet
            take(pair.router, 100, SHAPE, queue, {}, allowance=0, max_count=2 - len(queue))
        assert [item[2] for item in queue] == want
    queue = []
    while not queue:
        transport.take_run(pair.router, 100, SHAPE, queue, {}, allowance=0, max_count=9)
    assert [item[2] for item in queue] == [b"4"]


def test_nothing_queued_is_an_empty_run_not_again(pair: Pair) -> None:
    for take in TWINS.values():
        assert take(pair.router, 100, SHAPE, [], {}, allowance=0, max_count=4) == (0, None)


def test_a_closed_socket_is_an_error_not_a_crash() -> None:
    ctx = zmq.Context()
    sock = ctx.socket(zmq.ROUTER)
    sock.close()
    for take in TWINS.values():
        with pytest.raises(zmq.ZMQError):
            take(sock, 100, SHAPE, [], {}, allowance=0, max_count=4)
    ctx.term()


def test_wrong_argument_types_are_errors(pair: Pair) -> None:
    with pytest.raises(TypeError):
        transport.take_run(pair.router, 100, SHAPE, (), {}, allowance=0, max_count=4)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        transport.take_run(pair.router, 100, ("=", IDENT, 12, 4), [], {}, allowance=0, max_count=4)  # type: ignore[arg-type]


# -- RouterLimits.take_run: the peer's wrapper (the limit counted and logged) -------------
def _update_frames(n: int) -> list[bytes]:
    return [b"%012d" % n, TYPE_REQUEST_UPDATE, IDENT, b"data %d" % n]


def test_a_run_queues_updates_drops_one_over_the_limit_and_stops_at_another_type(
    pair: Pair,
) -> None:
    peer_metrics, log = PeerMetrics(), Mock()
    limits = RouterLimits(RaftOptions(), peer_metrics, log, owner="1")
    limits.message_limit = 200
    sent = [_update_frames(1), _update_frames(2), [b"x", b"?", b"y" * 300], _update_frames(3)]
    sent += [[b"\x07", TYPE_REQUEST_LOG_INFO, IDENT], _update_frames(4)]
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
    assert log.warning.call_args.args[0] == "message_too_large"
    (told,) = limits.backlog.tally.values()
    assert told == sum(sum(map(len, m)) + FRAME_ALLOWANCE * (len(m) + 1) for m in sent)


def test_a_run_is_at_most_run_length_messages(pair: Pair) -> None:
    limits = RouterLimits(RaftOptions(), PeerMetrics(), Mock(), owner="1")
    for n in range(RUN_LENGTH + 3):
        pair.dealer.send_multipart(_update_frames(n))
    queue: list[tuple[bytes, bytes, bytes]] = []
    while len(queue) < RUN_LENGTH + 3:
        taken, frames = limits.take_run(pair.router, SHAPE, queue)
        assert taken <= RUN_LENGTH and frames is None
        if taken == 0:
            assert pair.router.poll(10_000)
    assert [data for _, _, data in queue] == [b"data %d" % n for n in range(RUN_LENGTH + 3)]
