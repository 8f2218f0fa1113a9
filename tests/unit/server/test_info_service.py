"""InfoService: read-only answers from narrow views, compaction on demand, §10.6 types."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from server_fakes import (
    EventRecorder,
    FakeCluster,
    FakeLogBounds,
    FakeMachine,
    FakeSnapshots,
    RecordingReplies,
    metrics,
)

from raftlog.rpc.admin import CompactStatus, decode_compact_response
from raftlog.rpc.messages import (
    TYPE_REQUEST_CONFIG,
    TYPE_REQUEST_LOG_INFO,
    ClientDispatch,
    RequestBroadcastStateUrl,
    RequestConfig,
    RequestConfigResponse,
    RequestLogInfo,
    RequestLogInfoResponse,
)
from raftlog.rpc.response_decoders import decode_response
from raftlog.server.consistent_reads import ConsistentReads
from raftlog.server.info_service import InfoService
from raftlog.storage.base import SnapshotMeta
from raftlog.topics import wire as rpc
from raftlog.topics.records import RecordId


class FakeCompactor:
    def __init__(self, result: int | None) -> None:
        self.result = result
        self.calls = 0
        self.waiting: list[Callable[[int | None], None]] = []

    def start(self, on_done: Callable[[int | None], None] | None = None) -> None:
        self.calls += 1
        assert on_done is not None
        self.waiting.append(on_done)

    def finish(self) -> None:
        for done in self.waiting:
            done(self.result)
        self.waiting.clear()


class NoReadIndex:
    """A peer that never leads: every ReadIndex is refused."""

    leader_id: str | None = None

    def read_index(self, context: object) -> bool:
        return False


class Setup:
    def __init__(self, compacted: int | None = None) -> None:
        self.cluster = FakeCluster()
        self.bounds = FakeLogBounds()
        self.snapshots = FakeSnapshots()
        self.machine = FakeMachine(last_applied=9)
        self.compactor = FakeCompactor(compacted)
        self.replies = RecordingReplies()
        self.metrics = metrics()
        self.events = EventRecorder()
        self.svc = InfoService(
            cluster=self.cluster,
            log_bounds=self.bounds,
            snapshots=self.snapshots,
            machine=self.machine,
            handler=self.machine,
            compactor=self.compactor,
            replies=self.replies,
            metrics=self.metrics,
            log=self.events,
            pub_url="tcp://127.0.0.1:9000",
            reads=ConsistentReads(NoReadIndex(), self.machine, self.replies),
        )

    def last_frames(self) -> list[bytes]:
        return self.replies.frames()[-1][1]


def test_request_config_answers_leadership_and_peers() -> None:
    s = Setup()
    s.svc.request_config(b"r", b"\x01", RequestConfig())
    _, answer = decode_response(TYPE_REQUEST_CONFIG, s.last_frames())
    assert isinstance(answer, RequestConfigResponse)
    assert answer == RequestConfigResponse(True, "n1", s.cluster.config.all_peers())


def test_log_info_reports_the_prune_index_and_snapshot_size() -> None:
    s = Setup()
    s.snapshots.installed = SnapshotMeta(3, 1, 777)
    s.bounds.oldest = 6
    s.svc.request_log_info(b"r", b"\x01", RequestLogInfo())
    _, info = decode_response(TYPE_REQUEST_LOG_INFO, s.last_frames())
    assert isinstance(info, RequestLogInfoResponse)
    assert info == RequestLogInfoResponse(True, "n1", 3, 1, 9, 10, 12, 777, 5)
    s.bounds.oldest = None  # no request id remembered: everything may be pruned
    s.svc.request_log_info(b"r", b"\x02", RequestLogInfo())
    _, info = decode_response(TYPE_REQUEST_LOG_INFO, s.last_frames())
    assert isinstance(info, RequestLogInfoResponse) and info.prune_index == 12


def test_broadcast_url_is_this_peers_own() -> None:
    s = Setup()
    s.svc.broadcast_url(b"r", b"\x01", RequestBroadcastStateUrl())
    assert s.last_frames() == [b"\x01", b"tcp://127.0.0.1:9000"]


def test_compact_answers_the_new_snapshot_index_or_nothing() -> None:
    for result, status, frame in ((42, CompactStatus.COMPACTED, b"\x2a"), (None, None, b"\x00")):
        s = Setup(result)
        s.svc.compact(b"r", b"\x01", ClientDispatch(b"AC"))
        assert s.replies.sent == []  # answered once the snapshot is built
        s.compactor.finish()
        assert s.last_frames() == [b"\x01", frame] and s.compactor.calls == 1
        answer = decode_compact_response(s.last_frames()[1:])
        assert answer.status is (status or CompactStatus.NOTHING_TO_COMPACT)


def test_other_types_go_to_the_state_machine_or_are_dropped() -> None:
    s = Setup()
    s.machine.answers[b"ZZ"] = [b"a", b"b"]
    s.svc.state_machine_request(b"r", b"\x01", ClientDispatch(b"ZZ"))
    assert s.last_frames() == [b"\x01", b"a", b"b"]
    s.svc.state_machine_request(b"r", b"\x02", ClientDispatch(b"QQ"))
    assert len(s.replies.sent) == 1
    assert s.metrics.messages_dropped.labels(reason="unhandled_type").value == 1


def test_a_read_that_stopped_goes_on_and_its_resends_are_not_run_again() -> None:
    """A ``TR`` answer without records whose walk stopped (``resume``) is not sent: the
    read goes on at the next sweeps from where it stopped. The client's transport resends
    the request after silence; running each resend from the start, a long walk never
    ended, so a resend of a read in progress is dropped."""
    s = Setup()
    stopped = rpc.encode_read_response(rpc.ReadResult((), 9, True, True, RecordId(7, 3)))
    asked: list[rpc.ReadRequest] = []

    def handle(msg_type: bytes, args: Sequence[bytes]) -> list[bytes] | None:
        asked.append(rpc.decode_read_request(args))
        return stopped if len(asked) < 3 else rpc.encode_read_response(
            rpc.ReadResult((), 9, True, False)
        )

    s.machine.handle_request = handle  # type: ignore[method-assign]
    read = ClientDispatch(rpc.TYPE_READ, tuple(rpc.encode_read_request(rpc.ReadRequest("t"))))
    s.svc.state_machine_request(b"r", b"\x01", read)
    s.svc.state_machine_request(b"r", b"\x01", read)  # the transport's resend
    assert len(asked) == 1 and s.replies.sent == []
    s.svc.sweep(0.0)
    assert (asked[1].from_index, asked[1].from_position, asked[1].inclusive) == (7, 3, True)
    while not s.replies.sent:
        s.svc.sweep(0.0)
    assert len(asked) == 3 and rpc.decode_read_response(list(s.last_frames()[1:])).records == ()
