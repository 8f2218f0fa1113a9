"""PeerService: known senders only, debounced retransmissions, answers routed back."""

from __future__ import annotations

import pytest
from server_fakes import EventRecorder, FakeCluster, RecordingReplies, metrics

from raftlog.entry import EntryType, LogEntry
from raftlog.rpc.messages import (
    AppendEntries,
    AppendEntriesResponse,
    InstallSnapshot,
    RequestVote,
    RequestVoteResponse,
)
from raftlog.server.peer_service import PeerService, PeerToken

LIMIT = 100
"""This peer's ``max_log_entry_data_size`` in these tests."""


class Setup:
    def __init__(self) -> None:
        self.core = FakeCluster()
        self.replies = RecordingReplies()
        self.metrics = metrics()
        self.events = EventRecorder()
        self.svc = PeerService(self.core, self.core, self.replies, self.metrics, self.events,
                               max_entry_data=LIMIT)

    def token(self, n: int = -1) -> PeerToken:
        token = self.core.stepped[n][0]
        assert isinstance(token, PeerToken)
        return token


def append(leader: str = "n2") -> AppendEntries:
    return AppendEntries(leader, 3, 0, 0, 0, ())


def test_a_vote_request_is_stepped_and_its_answer_goes_back_to_the_candidate() -> None:
    s = Setup()
    s.svc.request_vote(b"cand", b"\x07", RequestVote("n2", 4, 0, 0))
    token = s.token()
    s.svc.send_reply(token, RequestVoteResponse(4, True))
    assert s.replies.frames() == [(b"cand", [b"\x07", b"\x04", b"\x01"])]


def test_unknown_senders_are_dropped_unless_the_configuration_is_unknown() -> None:
    s = Setup()
    s.svc.request_vote(b"x", b"\x01", RequestVote("intruder", 99, 0, 0))
    s.svc.from_leader(b"x", b"\x02", append("intruder"))
    assert s.core.stepped == []
    assert s.metrics.messages_dropped.labels(reason="unknown_sender").value == 2
    assert s.events.names() == ["unknown_sender_dropped"]
    s.core.config_known = False  # right after a snapshot install: hear everyone
    s.svc.from_leader(b"x", b"\x03", append("intruder"))
    assert len(s.core.stepped) == 1


def test_a_retransmission_is_answered_from_the_cached_reply() -> None:
    s = Setup()
    s.svc.from_leader(b"lead", b"\x05", append())
    s.svc.from_leader(b"lead", b"\x05", append())  # still being processed: dropped
    assert len(s.core.stepped) == 1 and s.replies.sent == []
    s.svc.send_reply(s.token(), AppendEntriesResponse(3, True))
    s.svc.from_leader(b"lead", b"\x05", append())
    assert len(s.core.stepped) == 1
    assert [f for _, f in s.replies.frames()] == [[b"\x05", b"\x03", b"\x01"]] * 2
    assert s.metrics.debounced_resends.value == 1
    # both copies told the core its leader is alive (issue #12, finding 3)
    assert s.core.heard == [(append().leader_id, append().term)] * 2
    s.svc.from_leader(b"lead", b"\x06", append())  # a new msgid: a new request
    assert len(s.core.stepped) == 2


def test_install_snapshot_is_debounced_like_append_entries() -> None:
    s = Setup()
    msg = InstallSnapshot("n2", 3, 10, 2, 0, 5, b"abcde")
    s.svc.from_leader(b"lead", b"\x05", msg)
    s.svc.from_leader(b"lead", b"\x05", msg)
    assert len(s.core.stepped) == 1


def test_a_foreign_token_is_refused() -> None:
    with pytest.raises(TypeError):
        Setup().svc.send_reply(("not", "ours"), RequestVoteResponse(1, False))


def test_an_entry_over_this_peers_limit_is_dropped_not_stored_and_the_leader_heard() -> None:
    """A leader with a larger limit (a rolling change) made this follower's storage refuse
    the entry, and the follower exit; now it stays behind, without an election."""
    s = Setup()
    fits = LogEntry(bytes(12), EntryType.STATE, 3, b"x" * LIMIT)
    over = LogEntry(bytes(12), EntryType.STATE, 3, b"x" * (LIMIT + 1))
    s.svc.from_leader(b"lead", b"\x05", AppendEntries("n2", 3, 7, 3, 7, (fits,)))
    assert len(s.core.stepped) == 1
    for msg_id in (b"\x06", b"\x07"):  # the leader sends it again
        s.svc.from_leader(b"lead", msg_id, AppendEntries("n2", 3, 8, 3, 7, (fits, over)))
    # stepped as a heartbeat (the core learns term and leader, even a new one) ...
    assert [m for _, m in s.core.stepped[1:]] == [AppendEntries("n2", 3, 8, 3, 7, ())] * 2
    for n in (1, 2):  # ... and its answer is never sent: the leader would count a match
        s.svc.send_reply(s.token(n), AppendEntriesResponse(3, True))
    assert s.replies.sent == []
    assert s.metrics.messages_dropped.labels(reason="entry_too_large").value == 2
    (event,) = [e for e in s.events.events if e[1] == "entry_over_limit_dropped"]
    assert event[0] == "error" and event[2]["index"] == 10 and event[2]["size"] == LIMIT + 1
