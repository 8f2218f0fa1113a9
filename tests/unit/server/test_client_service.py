"""ClientService: when RequestUpdate answers go out, and to whom."""

from __future__ import annotations

from typing import Any

from raftlog.consensus import Appended, Duplicate, NotLeader
from raftlog.rpc.frames import pack_json
from raftlog.rpc.messages import RequestUpdate
from raftlog.server.client_service import ClientService

RID = b"r" * 12


class FakeCore:
    def __init__(self, result: Any) -> None:
        self.result = result

    def propose(self, request_id: bytes, data: bytes, now_ms: int) -> Any:
        return self.result


def service(result: Any) -> tuple[ClientService, list[tuple[bytes, list[bytes]]], list[float]]:
    sent: list[tuple[bytes, list[bytes]]] = []
    clock = [0.0]
    svc = ClientService(
        FakeCore(result),  # type: ignore[arg-type]
        lambda routing, frames: sent.append((routing, frames)),
        lambda: 0,
        clock=lambda: clock[0],
        accepted_delay=0.1,
    )
    return svc, sent, clock


def test_done_is_sent_once_applied_and_accepted_only_to_slow_updates() -> None:
    svc, sent, clock = service(Appended(5))
    svc.request_update(b"a", RequestUpdate(RID, b"x"), applied=4)
    assert sent == []
    clock[0] = 0.05
    svc.send_overdue_accepts(clock[0], applied=4)
    assert sent == []  # not overdue yet
    clock[0] = 0.2
    svc.send_overdue_accepts(clock[0], applied=4)
    assert sent == [(b"a", [RID, b"\x01"])]
    svc.on_applied(5)
    assert sent[-1] == (b"a", [RID, b"\x01", pack_json(5)])
    svc.on_applied(6)
    assert len(sent) == 2  # answered once


def test_a_duplicate_of_an_applied_entry_is_answered_at_once() -> None:
    svc, sent, _ = service(Duplicate(3))
    svc.request_update(b"a", RequestUpdate(RID, b"x"), applied=4)
    assert sent == [(b"a", [RID, b"\x01", pack_json(3)])]


def test_a_refused_entry_is_answered_with_the_refusal_instead_of_done() -> None:
    svc, sent, _ = service(Appended(7))
    refused = {7: [b"", b"\xc0", b"why"]}
    svc.request_update(b"a", RequestUpdate(RID, b"x"), applied=6, refusal=refused.get)
    svc.on_applied(7)
    assert sent == [(b"a", [RID, b"", b"\xc0", b"why"])]


def test_stepping_down_answers_every_waiter_not_leader_with_the_new_leader() -> None:
    svc, sent, _ = service(Appended(9))
    svc.request_update(b"a", RequestUpdate(RID, b"x"), applied=1)
    svc.fail_all("2")
    assert sent == [(b"a", [RID, b"", pack_json("2")])]
    svc.on_applied(9)
    assert len(sent) == 1


def test_not_leader_is_answered_with_the_leader_it_knows() -> None:
    svc, sent, _ = service(NotLeader("3"))
    svc.request_update(b"a", RequestUpdate(RID, b"x"), applied=0)
    assert sent == [(b"a", [RID, b"", pack_json("3")])]
