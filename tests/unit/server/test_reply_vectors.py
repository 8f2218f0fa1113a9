"""Byte vectors of every reply a peer sends, as ``ReplySender`` puts them on the wire
(``rpc.responses.encode_reply``): ``[id, frames...]``. Literal bytes, so any change to an
encoder that would change what clients (the reference's included) read fails here."""

from __future__ import annotations

import pytest

from raftlog.entry import EntryType, LogEntry
from raftlog.rpc.admin import CompactResponse, CompactStatus
from raftlog.rpc.denied import AccessDenied, QuotaRefusal
from raftlog.rpc.messages import (
    AppendEntriesResponse,
    ClientDispatchResponse,
    ConfigUpdateErrorInfo,
    ConfigUpdateResponse,
    ConfigUpdateStatus,
    EntriesStatus,
    InstallSnapshotResponse,
    Peer,
    RequestBroadcastStateUrlResponse,
    RequestConfigResponse,
    RequestEntriesResponse,
    RequestLogInfoResponse,
    RequestUpdateResponse,
    RequestVoteResponse,
    SnapshotChunk,
    UpdateStatus,
)
from raftlog.server.replies import REPLY_TYPES, ServerReply, encode_reply
from raftlog.topics.records import TopicError
from raftlog.topics.wire_publish import PublishReply, PublishStatus

ID = b"\x00\x00\x2a"  # a peer msgid (uints are little-endian on the wire: 300 = 2c 01)
RID = bytes(range(12))  # a request id (RequestUpdate, ConfigUpdate, TP)
ENTRY = LogEntry(b"\x01" * 12, EntryType.STATE, 2, b"ab")
ENTRY_BYTES = bytes.fromhex("01010101010101010101010100020000000000006162")
ERROR_E_M = bytes.fromhex("82a46e616d65a145a76d657373616765a16d")  # {name: E, message: m}
ERROR_TOPIC = bytes.fromhex("82a46e616d65ac556e6b6e6f776e546f706963a76d657373616765a26e6f")

VECTORS: list[tuple[str, bytes, ServerReply, list[bytes]]] = [
    # peer RPCs (§7-§9)
    ("vote granted", ID, RequestVoteResponse(5, True), [ID, b"\x05", b"\x01"]),
    ("vote refused", ID, RequestVoteResponse(5, False), [ID, b"\x05", b""]),
    ("append ok", ID, AppendEntriesResponse(5, True), [ID, b"\x05", b"\x01"]),
    ("append hint", ID, AppendEntriesResponse(5, False, 300), [ID, b"\x05", b"", b"\x2c\x01"]),
    ("snapshot done", ID, InstallSnapshotResponse(5), [ID, b"\x05"]),
    ("snapshot offset", ID, InstallSnapshotResponse(5, 7), [ID, b"\x05", b"\x07"]),
    # RequestUpdate (§10.3)
    ("update accepted", RID, RequestUpdateResponse(RID, UpdateStatus.ACCEPTED), [RID, b"\x01"]),
    (
        "update done",
        RID,
        RequestUpdateResponse(RID, UpdateStatus.DONE, index=300),
        [RID, b"\x01", b"\xcd\x01\x2c"],
    ),
    (
        "update not leader",
        RID,
        RequestUpdateResponse(RID, UpdateStatus.NOT_LEADER, leader_id="n2"),
        [RID, b"", b"\xa2n2"],
    ),
    (
        "update no leader",
        RID,
        RequestUpdateResponse(RID, UpdateStatus.NOT_LEADER),
        [RID, b"", b"\xc0"],
    ),
    ("update expired", RID, RequestUpdateResponse(RID, UpdateStatus.EXPIRED), [RID, b""]),
    # TP publish (raftlog.topics.wire)
    ("publish accepted", RID, PublishReply(PublishStatus.ACCEPTED), [RID, b"\x01"]),
    ("publish done", RID, PublishReply(PublishStatus.DONE, 7), [RID, b"\x01", b"\x07"]),
    (
        "publish not leader",
        RID,
        PublishReply(PublishStatus.NOT_LEADER, leader_id="n2"),
        [RID, b"", b"\xa2n2"],
    ),
    ("publish expired", RID, PublishReply(PublishStatus.EXPIRED), [RID, b""]),
    (
        "publish rejected",
        RID,
        PublishReply(PublishStatus.REJECTED, error=TopicError("UnknownTopic", "no")),
        [RID, b"", b"\xc0", ERROR_TOPIC],
    ),
    # ConfigUpdate (§10.4)
    (
        "config accepted",
        RID,
        ConfigUpdateResponse(RID, ConfigUpdateStatus.OK),
        [RID, b"\x01"],
    ),
    (
        "config done",
        RID,
        ConfigUpdateResponse(RID, ConfigUpdateStatus.OK, index=7),
        [RID, b"\x01", b"\x07"],
    ),
    (
        "config not leader",
        RID,
        ConfigUpdateResponse(RID, ConfigUpdateStatus.NOT_LEADER, leader_id="n2"),
        [RID, b"\x00", b"\xa2n2"],
    ),
    (
        "config error",
        RID,
        ConfigUpdateResponse(
            RID, ConfigUpdateStatus.CONFIG_ERROR, error=ConfigUpdateErrorInfo("E", "m")
        ),
        [RID, b"\x02", ERROR_E_M],
    ),
    ("config busy", RID, ConfigUpdateResponse(RID, ConfigUpdateStatus.BUSY), [RID, b"\x03"]),
    ("config expired", RID, ConfigUpdateResponse(RID, ConfigUpdateStatus.EXPIRED), [RID, b"\x04"]),
    # RequestEntries (§10.5)
    (
        "entries not leader",
        ID,
        RequestEntriesResponse(EntriesStatus.NOT_LEADER, leader_id="n2"),
        [ID, b"\x00", b"\xa2n2"],
    ),
    (
        "entries last, none",
        ID,
        RequestEntriesResponse(EntriesStatus.LAST, last_index=7),
        [ID, b"\x01", b"\xc0", b"\x07"],
    ),
    (
        "entries more, stored bytes",
        ID,
        RequestEntriesResponse(EntriesStatus.MORE, last_index=7, raw_entries=[ENTRY_BYTES]),
        [ID, b"\x02", b"\xc0", b"\x07", ENTRY_BYTES],
    ),
    (
        "entries last, typed",
        ID,
        RequestEntriesResponse(EntriesStatus.LAST, last_index=7, entries=(ENTRY,)),
        [ID, b"\x01", b"\xc0", b"\x07", ENTRY_BYTES],
    ),
    (
        "entries snapshot chunk",
        ID,
        RequestEntriesResponse(
            EntriesStatus.SNAPSHOT, snapshot=SnapshotChunk(0, 10, 3, 7, b"chunk")
        ),
        [ID, b"\x03", bytes.fromhex("93000a03"), b"\x07", b"chunk"],
    ),
    # queries (§10.1, §10.2, §11.1)
    (
        "config",
        ID,
        RequestConfigResponse(True, "n1", (Peer("n1", "tcp://127.0.0.1:7001"),)),
        [
            ID,
            b"\x01",
            b"\xa2n1",
            bytes.fromhex("9192a26e31b47463703a2f2f3132372e302e302e313a37303031"),
        ],
    ),
    (
        "log info",
        ID,
        RequestLogInfoResponse(False, None, 3, 1, 9, 10, 12, 0, 5),
        [ID, b"", b"\xc0", b"\x03", b"\x01", b"\x09", b"\x0a", b"\x0c", b"\x00", b"\x05"],
    ),
    (
        "broadcast url",
        ID,
        RequestBroadcastStateUrlResponse("tcp://h:1"),
        [ID, b"tcp://h:1"],
    ),
    # raftlog extensions
    ("compacted", ID, CompactResponse(CompactStatus.COMPACTED, 300), [ID, b"\x2c\x01"]),
    ("nothing to compact", ID, CompactResponse(CompactStatus.NOTHING_TO_COMPACT), [ID, b"\x00"]),
    ("state machine answer", ID, ClientDispatchResponse((b"a", b"")), [ID, b"a", b""]),
    # a CURVE peer's refusal (raftlog extension, rpc/denied.py)
    (
        "access denied",
        ID,
        AccessDenied("needs role writer"),
        [ID, b"!ACCESS-DENIED", b"needs role writer"],
    ),
    # a principal over its quota (issue #25)
    (
        "quota exceeded",
        ID,
        QuotaRefusal(250, "publish_rate", "billing: 10 records/s"),
        [ID, b"!QUOTA-EXCEEDED", b"250", b"publish_rate", b"billing: 10 records/s"],
    ),
]


@pytest.mark.parametrize(
    ("msg_id", "reply", "frames"), [v[1:] for v in VECTORS], ids=[v[0] for v in VECTORS]
)
def test_every_reply_encodes_to_its_bytes(
    msg_id: bytes, reply: ServerReply, frames: list[bytes]
) -> None:
    assert encode_reply(msg_id, reply) == frames


def test_every_reply_type_a_peer_sends_has_a_vector() -> None:
    pinned = {type(reply) for _, _, reply, _ in VECTORS}
    assert pinned == REPLY_TYPES
