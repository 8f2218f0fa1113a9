"""ClientService: one path for ``=`` and ``TP``, when answers go out, and to whom."""

from __future__ import annotations

from collections.abc import Iterable

import pytest
from server_fakes import EventRecorder, FakeCluster, FakeMachine, RecordingReplies, metrics

from raftlog.consensus import (
    Appended,
    ConfigAccepted,
    ConfigBusy,
    ConfigDone,
    ConfigNotLeader,
    ConfigProposeResult,
    ConfigRejected,
    Duplicate,
    Expired,
    NotLeader,
    ProposeResult,
)
from raftlog.rpc.frames import pack_json
from raftlog.rpc.messages import (
    ClientDispatch,
    ConfigUpdate,
    ConfigUpdateErrorInfo,
    RequestUpdate,
)
from raftlog.server.client_service import ClientService
from raftlog.topics.records import TopicError
from raftlog.topics.wire import TYPE_PUBLISH
from raftlog.topics.wire_publish import PublishStatus, decode_publish_reply

RID = b"r" * 12


class FakeGate:
    """``UpdateGate``: refuses data starting with b"bad", stamps the rest with b"+"."""

    def __init__(self) -> None:
        self.refused_at: dict[int, TopicError] = {}
        self.prepared: list[bytes] = []
        self.asked: list[list[bytes]] = []

    def needs_prepare(self, datas: Iterable[bytes]) -> bool:
        """Only data starting with b"t" (a "topic entry") or b"bad" needs preparing here."""
        datas = list(datas)
        self.asked.append(datas)
        return any(d.startswith((b"t", b"bad")) for d in datas)

    def prepare(self, data: bytes) -> bytes | TopicError:
        self.prepared.append(data)
        if data.startswith(b"bad"):
            return TopicError("UnknownTopic", "no such topic")
        return data + b"+"

    def check_publish(self, msg_id: bytes, args: tuple[bytes, ...]) -> TopicError | None:
        return None if len(args) == 1 else TopicError("BadRequest", "one frame")

    def refusal_at(self, index: int) -> TopicError | None:
        return self.refused_at.get(index)


class Setup:
    def __init__(self, *results: ProposeResult, applied: int = 0) -> None:
        self.core = FakeCluster(results=list(results))
        self.replies = RecordingReplies()
        self.machine = FakeMachine(last_applied=applied)
        self.gate = FakeGate()
        self.metrics = metrics()
        self.events = EventRecorder()
        self.clock = [0.0]
        self.svc = ClientService(
            self.core,
            self.replies,
            machine=self.machine,
            gate=self.gate,
            metrics=self.metrics,
            log=self.events,
            max_data=100,
            now_ms=lambda: 0,
            clock=lambda: self.clock[0],
            accepted_delay=0.1,
        )

    def update(self, routing: bytes, rid: bytes, data: bytes) -> None:
        """One ``=`` in a drain of its own: queued, then proposed (the dispatcher's flush)."""
        self.svc.request_update(routing, rid, RequestUpdate(rid, data))
        self.svc.propose_queued()

    def wire(self) -> list[tuple[bytes, list[bytes]]]:
        return self.replies.frames()

    def apply(self, index: int) -> None:
        self.machine.last_applied = index
        self.svc.on_applied(index)


def test_done_is_sent_once_applied_and_accepted_only_to_slow_updates() -> None:
    s = Setup(Appended(5), applied=4)
    s.update(b"a", RID, b"x")
    assert s.wire() == []
    s.svc.send_overdue_accepts(0.05)
    assert s.wire() == []  # not overdue yet
    s.svc.send_overdue_accepts(0.2)
    assert s.wire() == [(b"a", [RID, b"\x01"])]
    s.apply(5)
    assert s.wire()[-1] == (b"a", [RID, b"\x01", pack_json(5)])
    s.apply(6)
    assert len(s.wire()) == 2  # answered once


def test_a_duplicate_of_an_applied_entry_is_answered_at_once() -> None:
    s = Setup(Duplicate(3), applied=4)
    s.update(b"a", RID, b"x")
    assert s.wire() == [(b"a", [RID, b"\x01", pack_json(3)])]


def test_the_same_request_waiting_twice_is_answered_once() -> None:
    s = Setup(Appended(5), Duplicate(5))
    s.update(b"a", RID, b"x")
    s.update(b"a", RID, b"x")
    assert s.svc.pending_updates == 1
    s.apply(5)
    assert len(s.wire()) == 1


def test_the_same_request_twice_in_one_drain_is_held_once_and_answered_once() -> None:
    """A client's retry that lands in the same drain as its first copy: the batch appends
    the first and calls the second a ``Duplicate`` of that very entry. The second must find
    the first in the batch's run instead of waiting beside it (answered twice otherwise)."""
    s = Setup(Appended(5), Duplicate(5))
    s.svc.request_update(b"a", RID, RequestUpdate(RID, b"x"))
    s.svc.request_update(b"a", RID, RequestUpdate(RID, b"x"))
    s.svc.propose_queued()
    assert s.core.batches == [2] and s.svc.pending_updates == 1
    s.svc.on_committed(5)
    assert s.wire() == [(b"a", [RID, b"\x01", pack_json(5)])]
    s.apply(5)
    assert len(s.wire()) == 1


def test_stepping_down_answers_every_waiter_not_leader_with_the_new_leader() -> None:
    s = Setup(Appended(9), Appended(10))
    s.update(b"a", RID, b"x")
    s.svc.publish(b"p", b"t" * 12, ClientDispatch(TYPE_PUBLISH, (b"y",)))
    s.core.config_results.append(ConfigAccepted(11))
    s.svc.config_update(b"c", b"c" * 12, ConfigUpdate(b"c" * 12, ()))
    s.svc.fail_all("2")
    assert s.wire()[1:] == [
        (b"a", [RID, b"", pack_json("2")]),
        (b"p", [b"t" * 12, b"", pack_json("2")]),
        (b"c", [b"c" * 12, b"\x00", pack_json("2")]),
    ]
    s.apply(10)
    s.svc.send_overdue_accepts(1.0)
    assert len(s.wire()) == 4  # nothing more after failing


def test_not_leader_and_expired_are_answered_at_once() -> None:
    s = Setup(NotLeader("3"), Expired())
    s.update(b"a", RID, b"x")
    s.update(b"a", RID, b"x")
    assert s.wire() == [(b"a", [RID, b"", pack_json("3")]), (b"a", [RID, b""])]


def test_an_oversized_update_is_dropped_and_counted() -> None:
    s = Setup(Appended(1))
    s.update(b"a", RID, b"x" * 101)
    assert s.wire() == [] and s.core.proposed == []
    assert s.metrics.messages_dropped.labels(reason="oversized_update").value == 1
    assert s.events.names() == ["oversized_update_ignored"]


def test_both_ways_in_are_prepared_by_the_gate_on_the_same_path() -> None:
    s = Setup(Appended(1), Appended(2))
    s.update(b"a", RID, b"tx")  # b"t": the fake gate's "topic entry"
    s.svc.publish(b"p", b"t" * 12, ClientDispatch(TYPE_PUBLISH, (b"y",)))
    assert s.core.proposed == [(RID, b"tx+"), (b"t" * 12, b"y+")]


def test_a_retry_is_not_prepared_again() -> None:
    s = Setup(Duplicate(4))
    s.svc.publish(b"p", RID, ClientDispatch(TYPE_PUBLISH, (b"bad",)))
    assert s.gate.prepared == [] and s.wire() == []  # the core knew it: waits for index 4


def test_a_refused_publish_is_answered_a_refused_update_is_ignored() -> None:
    s = Setup(Appended(1), Appended(2))
    s.svc.publish(b"p", RID, ClientDispatch(TYPE_PUBLISH, (b"bad",)))
    s.update(b"a", b"u" * 12, b"bad")
    ((routing, frames),) = s.wire()
    reply = decode_publish_reply(frames[1:])
    assert routing == b"p" and reply.status is PublishStatus.REJECTED
    assert reply.error is not None and reply.error.name == "UnknownTopic"
    refused = s.metrics.topic_publishes_refused
    assert (refused.labels(via="publish").value, refused.labels(via="update").value) == (1, 1)


def test_bad_publish_frames_are_refused_before_proposing() -> None:
    s = Setup(Appended(1))
    s.svc.publish(b"p", RID, ClientDispatch(TYPE_PUBLISH, ()))
    assert s.core.proposed == []
    assert decode_publish_reply(s.wire()[0][1][1:]).status is PublishStatus.REJECTED


def test_a_publish_refused_at_apply_gets_the_refusal_instead_of_done() -> None:
    s = Setup(Appended(7), Appended(8))
    s.gate.refused_at[7] = TopicError("UnknownTopic", "deleted meanwhile")
    s.svc.publish(b"p", RID, ClientDispatch(TYPE_PUBLISH, (b"y",)))
    s.update(b"a", b"u" * 12, b"x")
    s.apply(8)
    publish, update = s.wire()
    assert decode_publish_reply(publish[1][1:]).status is PublishStatus.REJECTED
    assert update == (b"a", [b"u" * 12, b"\x01", pack_json(8)])


@pytest.mark.parametrize(
    ("result", "frames"),
    [
        (ConfigAccepted(5), [b"\x01"]),
        (ConfigDone(4), [b"\x01", pack_json(4)]),
        (ConfigNotLeader("n2"), [b"\x00", pack_json("n2")]),
        (
            ConfigRejected(ConfigUpdateErrorInfo("E", "m")),
            [b"\x02", pack_json({"name": "E", "message": "m"})],
        ),
        (ConfigBusy(), [b"\x03"]),
    ],
)
def test_config_update_answers(result: ConfigProposeResult, frames: list[bytes]) -> None:
    s = Setup()
    s.core.config_results.append(result)
    s.svc.config_update(b"c", RID, ConfigUpdate(RID, ()))
    assert s.wire() == [(b"c", [RID, *frames])]


def test_config_completion_answers_the_waiters_with_the_joint_index() -> None:
    s = Setup()
    s.core.config_results.append(ConfigAccepted(5))
    s.svc.config_update(b"c", RID, ConfigUpdate(RID, ()))
    s.svc.on_config_completed(5)
    assert s.wire()[-1] == (b"c", [RID, b"\x01", pack_json(5)])


def test_update_latency_runs_from_acceptance_to_the_committed_reply() -> None:
    s = Setup(Appended(5), Appended(6), NotLeader("2"), applied=4)
    s.update(b"a", RID, b"x")
    s.clock[0] = 0.5
    s.update(b"b", b"s" * 12, b"y")
    s.update(b"c", b"t" * 12, b"z")
    s.clock[0] = 0.75
    s.apply(6)
    latency = s.metrics.update_latency_seconds.labels()
    assert latency.count == 2
    assert latency.sum == pytest.approx(0.75 + 0.25)
    results = {k[0]: c.value for k, c in s.metrics.proposals.series() if c.value}
    assert results == {"appended": 2, "not_leader": 1}


def test_a_plain_update_is_answered_at_commit_a_publish_only_once_applied() -> None:
    """Issue #28: ``=`` is answered in the pass that commits its entry, before the state
    machine applies it; ``TP`` waits for the apply, which alone knows whether the batch was
    refused (``raftlog.server.update_waiters``)."""
    s = Setup(Appended(5), Appended(6), applied=4)
    s.update(b"a", RID, b"x")
    s.svc.publish(b"b", b"p" * 12, ClientDispatch(TYPE_PUBLISH, (b"y",)))
    s.svc.on_committed(6)
    assert [routing for routing, _ in s.wire()] == [b"a"]  # the publish is not answered yet
    assert s.svc.pending_updates == 1
    s.gate.refused_at[6] = TopicError("ExpectationFailed", "revision moved")
    s.apply(6)
    ((_, publish_frames),) = s.wire()[1:]
    assert decode_publish_reply(publish_frames[1:]).status is PublishStatus.REJECTED
    assert s.svc.pending_updates == 0


def test_a_plain_update_still_waiting_is_answered_at_apply_without_on_committed() -> None:
    """Drivers that never call ``on_committed`` (the simulator's executor may omit it) still
    get every answer, at the apply."""
    s = Setup(Appended(5), applied=4)
    s.update(b"a", RID, b"x")
    s.apply(5)
    assert [routing for routing, _ in s.wire()] == [b"a"]


def test_a_drains_updates_are_proposed_as_one_batch_and_each_answered() -> None:
    """Issue #28: ``=`` updates are queued until the dispatcher's flush, then proposed with
    one ``propose_many`` (one clock reading); each gets its own answer, as if alone."""
    done, retried, gone = b"d" * 12, b"s" * 12, b"g" * 12
    s = Setup(Appended(5), Duplicate(3), NotLeader("2"), Appended(6), applied=4)
    s.svc.request_update(b"a", RID, RequestUpdate(RID, b"x"))
    s.svc.request_update(b"b", done, RequestUpdate(done, b"y"))
    s.svc.request_update(b"z", b"o" * 12, RequestUpdate(b"o" * 12, b"x" * 101))  # oversized
    s.svc.request_update(b"c", gone, RequestUpdate(gone, b"z"))
    s.svc.request_update(b"d", retried, RequestUpdate(retried, b"w"))
    assert s.core.proposed == [] and s.wire() == []  # nothing before the flush
    s.svc.propose_queued()
    assert s.core.batches == [4]  # the oversized one never reached the core
    assert [rid for rid, _ in s.core.proposed] == [RID, done, gone, retried]
    assert s.wire() == [
        (b"b", [done, b"\x01", pack_json(3)]),  # a retry of an applied entry: done at once
        (b"c", [gone, b"", pack_json("2")]),  # not leader: the leader named
    ]
    s.svc.on_committed(6)
    assert s.wire()[2:] == [
        (b"a", [RID, b"\x01", pack_json(5)]),
        (b"d", [retried, b"\x01", pack_json(6)]),
    ]
    results = {k[0]: c.value for k, c in s.metrics.proposals.series() if c.value}
    assert results == {"appended": 2, "duplicate": 1, "not_leader": 1}
    s.svc.propose_queued()  # an empty queue proposes nothing
    assert s.core.batches == [4]


def test_a_batch_the_gate_would_not_change_is_proposed_without_prepare() -> None:
    """Issue #28: the gate is asked once per batch; a batch of plain data (what a
    reference client sends) skips the Python ``prepare`` call per update, a batch with one
    entry to prepare is prepared whole, in order."""
    s = Setup(Appended(5), Appended(6), Appended(7), Appended(8), Appended(9))
    for i, data in enumerate((b"x", b"y")):
        s.svc.request_update(b"a", bytes([i]) * 12, RequestUpdate(bytes([i]) * 12, data))
    s.svc.propose_queued()
    assert s.gate.asked == [[b"x", b"y"]] and s.gate.prepared == []
    assert [data for _, data in s.core.proposed] == [b"x", b"y"]
    for i, data in enumerate((b"p", b"t1", b"q"), start=2):
        s.svc.request_update(b"a", bytes([i]) * 12, RequestUpdate(bytes([i]) * 12, data))
    s.svc.propose_queued()
    assert s.gate.prepared == [b"p", b"t1", b"q"]
    assert [data for _, data in s.core.proposed][2:] == [b"p+", b"t1+", b"q+"]


def test_a_batchs_appended_updates_wait_as_one_run_and_are_answered_as_committed() -> None:
    """Issue #28: the appended updates of one batch are held as one run
    (``update_waiters.WaiterRun``): each still answered at its own index, a commit in the
    middle of the run answers its front, the interim ``[true]`` goes to those not yet
    applied, and the latency histogram counts every update."""
    rids = [bytes([65 + k]) * 12 for k in range(4)]
    s = Setup(Appended(5), Duplicate(2), Appended(6), Appended(7), applied=4)
    for k, rid in enumerate(rids):
        s.svc.request_update(b"c%d" % k, rid, RequestUpdate(rid, b"x"))
    s.clock[0] = 1.0
    s.svc.propose_queued()
    assert s.wire() == [(b"c1", [rids[1], b"\x01", pack_json(2)])]  # applied: at once
    assert s.svc.pending_updates == 3
    s.clock[0] = 1.25
    s.svc.on_committed(6)
    assert s.wire()[1:] == [
        (b"c0", [rids[0], b"\x01", pack_json(5)]),
        (b"c2", [rids[2], b"\x01", pack_json(6)]),
    ]
    assert s.svc.pending_updates == 1
    s.machine.last_applied = 6
    s.svc.send_overdue_accepts(1.2)  # only index 7 is above the applied index
    assert s.wire()[3:] == [(b"c3", [rids[3], b"\x01"])]
    s.clock[0] = 2.0
    s.svc.on_committed(7)
    assert s.wire()[4:] == [(b"c3", [rids[3], b"\x01", pack_json(7)])]
    latency = s.metrics.update_latency_seconds.labels()
    assert latency.count == 3
    assert latency.sum == pytest.approx(0.25 + 0.25 + 1.0)
    results = {k[0]: c.value for k, c in s.metrics.proposals.series() if c.value}
    assert results == {"appended": 3, "duplicate": 1}
