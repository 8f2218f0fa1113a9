"""The dispatcher: header checks, decoding, and the handler table (plain handlers)."""

from __future__ import annotations

import pytest
from server_fakes import EventRecorder, metrics

from raftlog.errors import LocalProtocolError
from raftlog.metrics import PeerMetrics
from raftlog.rpc.messages import (
    TYPE_REQUEST_LOG_INFO,
    TYPE_REQUEST_UPDATE,
    ClientDispatch,
    Request,
    RequestLogInfo,
    RequestUpdate,
)
from raftlog.rpc.request_encoders import encode_request
from raftlog.server.dispatch import Dispatcher, Handler, route

IDENT = b"cluster"
RID = b"r" * 12


class Harness:
    def __init__(self) -> None:
        self.calls: list[tuple[str, bytes, bytes, Request]] = []
        self.metrics: PeerMetrics = metrics()
        self.events = EventRecorder()
        self.dispatcher = Dispatcher(
            IDENT,
            {
                TYPE_REQUEST_UPDATE: route(RequestUpdate, self.handler("update")),
                TYPE_REQUEST_LOG_INFO: route(RequestLogInfo, self.handler("info")),
            },
            route(ClientDispatch, self.handler("fallback")),
            self.metrics,
            self.events,
        )

    def handler(self, name: str) -> Handler:
        def handle(routing: bytes, msg_id: bytes, message: Request) -> None:
            self.calls.append((name, routing, msg_id, message))

        return handle

    def send(self, frames: list[bytes]) -> None:
        self.dispatcher.on_message([b"route", *frames])

    def dropped(self, reason: str) -> int:
        return self.metrics.messages_dropped.labels(reason=reason).value


def test_each_type_goes_to_its_handler_with_routing_and_id() -> None:
    h = Harness()
    h.send(encode_request(RequestUpdate(RID, b"data"), ident=IDENT))
    h.send(encode_request(RequestLogInfo(), ident=IDENT, id=b"\x09"))
    assert h.calls == [
        ("update", b"route", RID, RequestUpdate(RID, b"data")),
        ("info", b"route", b"\x09", RequestLogInfo()),
    ]


def test_types_without_an_entry_go_to_the_fallback() -> None:
    h = Harness()
    h.send(encode_request(ClientDispatch(b"ZZ", (b"a",)), ident=IDENT, id=b"\x01"))
    assert h.calls == [("fallback", b"route", b"\x01", ClientDispatch(b"ZZ", (b"a",)))]


@pytest.mark.parametrize(
    ("frames", "reason", "event"),
    [
        ([b"\x01", b"="], "short_message", "short_message_dropped"),
        ([b"\x01", b"=", b"other"], "wrong_ident", "wrong_ident_dropped"),
        ([b"\x01", b"", IDENT], "empty_type", "empty_type_dropped"),
        ([b"\x01", b"=", IDENT, b"data"], "malformed_message", "malformed_message_dropped"),
    ],
)
def test_bad_messages_are_dropped_counted_and_logged(
    frames: list[bytes], reason: str, event: str
) -> None:
    h = Harness()
    h.send(frames[:-1] if reason == "short_message" else frames)
    assert h.calls == [] and h.dropped(reason) == 1
    assert h.events.names() == [event]


def test_repeated_drops_are_logged_sampled_but_all_counted() -> None:
    h = Harness()
    for _ in range(150):
        h.send([b"\x01", b"=", b"other"])
    assert h.dropped("wrong_ident") == 150
    assert h.events.names() == ["wrong_ident_dropped"] * 2  # the 1st and the 101st


def test_a_wiring_mistake_is_loud() -> None:
    h = Harness()
    wrong = route(RequestLogInfo, h.handler("info"))
    with pytest.raises(LocalProtocolError):
        wrong(b"route", RID, RequestUpdate(RID, b"x"))


def _queueing_dispatcher(calls: list[str], queue: list[bytes]) -> Dispatcher:
    """RequestUpdates queued into ``queue`` and proposed as "batch ..." in ``calls``;
    RequestLogInfo handled as "info", anything else as "fallback"."""

    def queue_update(routing: bytes, msg_id: bytes, message: RequestUpdate) -> None:
        queue.append(message.data)

    def propose_queued() -> None:
        if queue:
            calls.append("batch " + b",".join(queue).decode())
            queue.clear()

    def info(routing: bytes, msg_id: bytes, message: RequestLogInfo) -> None:
        calls.append("info")

    return Dispatcher(
        IDENT,
        {
            TYPE_REQUEST_UPDATE: route(RequestUpdate, queue_update),
            TYPE_REQUEST_LOG_INFO: route(RequestLogInfo, info),
        },
        route(ClientDispatch, lambda routing, msg_id, message: calls.append("fallback")),
        metrics(),
        EventRecorder(),
        queues={TYPE_REQUEST_UPDATE: propose_queued},
    )


def test_a_queueing_type_is_flushed_before_any_other_type_and_on_flush() -> None:
    """``MessageRow.flush`` (issue #28): RequestUpdates are queued and proposed as one batch;
    the order of effects stays the arrival order, whatever arrives in between."""
    calls: list[str] = []
    dispatcher = _queueing_dispatcher(calls, [])

    def send(message: Request, msg_id: bytes | None = None) -> None:
        dispatcher.on_message([b"route", *encode_request(message, ident=IDENT, id=msg_id)])

    send(RequestUpdate(RID, b"1"))
    send(RequestUpdate(RID, b"2"))
    assert calls == []  # queued, not yet proposed
    send(RequestLogInfo(), b"\x09")
    send(RequestUpdate(RID, b"3"))
    send(ClientDispatch(b"ZZ", ()), b"\x0a")
    send(RequestUpdate(RID, b"4"))
    send(RequestUpdate(RID, b"5"))
    dispatcher.flush()  # the end of the drain
    dispatcher.flush()  # nothing owed: nothing runs
    assert calls == ["batch 1,2", "info", "batch 3", "fallback", "batch 4,5"]


def test_a_run_queued_past_the_dispatcher_is_flushed_like_one_it_queued() -> None:
    """The peer's drain queues runs of RequestUpdates straight from the socket
    (``RouterLimits.take_run``) and tells the dispatcher with ``queued_run``: the batch is
    then proposed before the next message of another type, as if ``on_message`` had queued
    it, and only once however many runs and messages it holds."""
    calls: list[str] = []
    queue: list[bytes] = []
    dispatcher = _queueing_dispatcher(calls, queue)
    queue += [b"1", b"2"]
    dispatcher.queued_run(TYPE_REQUEST_UPDATE)
    queue.append(b"3")
    dispatcher.queued_run(TYPE_REQUEST_UPDATE)
    assert calls == []
    dispatcher.on_message([b"route", *encode_request(RequestLogInfo(), ident=IDENT, id=b"\x09")])
    queue.append(b"4")
    dispatcher.queued_run(TYPE_REQUEST_UPDATE)
    dispatcher.on_message([b"route", *encode_request(RequestUpdate(RID, b"5"), ident=IDENT)])
    dispatcher.queued_run(TYPE_REQUEST_UPDATE)
    dispatcher.flush()
    dispatcher.flush()
    assert calls == ["batch 1,2,3", "info", "batch 4,5"]
