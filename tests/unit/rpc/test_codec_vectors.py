"""Every message vector of docs/protocol.md §16 (and the json/config vectors of §2.3/§4.2), both
ways: encoding gives exactly the reference's bytes, decoding gives the expected message. Also
the §5.3 dispatch rules, the documented leniencies and the refusals (local and remote)."""

from __future__ import annotations

import pytest

from raftlog.entry import LogEntry
from raftlog.errors import LocalProtocolError, RemoteProtocolError
from raftlog.rpc.codec import (
    decode_broadcast,
    decode_request,
    decode_request_args,
    encode_broadcast,
    split_header,
)
from raftlog.rpc.config import decode_config_payload, encode_config_payload
from raftlog.rpc.frames import encode_msg_id
from raftlog.rpc.messages import (
    AppendEntries,
    AppendEntriesResponse,
    ClientDispatch,
    ClientDispatchResponse,
    ConfigPayload,
    ConfigUpdate,
    ConfigUpdateErrorInfo,
    ConfigUpdateResponse,
    ConfigUpdateStatus,
    EntriesStatus,
    InstallSnapshot,
    InstallSnapshotResponse,
    Peer,
    Request,
    RequestBroadcastStateUrl,
    RequestBroadcastStateUrlResponse,
    RequestConfig,
    RequestConfigResponse,
    RequestEntries,
    RequestEntriesResponse,
    RequestLogInfo,
    RequestLogInfoResponse,
    RequestUpdate,
    RequestUpdateResponse,
    RequestVote,
    RequestVoteResponse,
    Response,
    SnapshotChunk,
    StateBroadcast,
    UpdateStatus,
)
from raftlog.rpc.request_encoders import encode_request
from raftlog.rpc.response_decoders import decode_response
from raftlog.rpc.responses import encode_response

IDENT = b"s3cr3t"
REQID = bytes.fromhex("5956dc8826f27e10dcccab20")
E1_HEX = "5956dc8826f27e10dcccab20000700000000000068656c6c6f"
E2_HEX = "0000000000000000000000000208000000000000c0"
P1_HEX = "9192a141b37463703a2f2f31302e302e302e313a38303437"
P4_HEX = (
    "9492a141b37463703a2f2f31302e302e302e313a3830343792a142b37463703a2f2f31302e302e302e323a3830"
    "343792a143b37463703a2f2f31302e302e302e333a3830343792a144b37463703a2f2f31302e302e302e343a38"
    "303437"
)
E1 = LogEntry(REQID, 0, 7, b"hello")
E2 = LogEntry.checkpoint(8)
P1 = (Peer("A", "tcp://10.0.0.1:8047"),)
P4 = tuple(Peer(c, f"tcp://10.0.0.{n}:8047") for n, c in enumerate("ABCD", 1))
ERROR_HEX = (
    "82a46e616d65a9547970654572726f72a76d657373616765b67065657273206d75737420626520616e206172726179"
)


def frames(spec: str) -> list[bytes]:
    """``"01 | 3f | (empty) | E1"`` -> frames, with the §16 shorthands substituted."""
    names = {"E1": E1_HEX, "E2": E2_HEX, "P1": P1_HEX, "P4": P4_HEX, "(empty)": ""}
    out = []
    for part in spec.split("|"):
        text = part.strip()
        out.append(bytes.fromhex(names.get(text, text).replace(" ", "")))
    return out


def test_entry_shorthands_are_the_entries() -> None:
    assert E1.to_bytes().hex() == E1_HEX
    assert E2.to_bytes().hex() == E2_HEX


REQUEST_VECTORS: list[tuple[str, Request, str]] = [
    ("vote", RequestVote("A", 5, 300, 4), "01 | 3f | 733363723374 | 41 | 05 | 2c01 | 04"),
    (
        "ae-heartbeat",
        AppendEntries("A", 8, 300, 7, 299),
        "02 | 2b | 733363723374 | 41 | 08 | 2c01 | 07 | 2b01",
    ),
    (
        "ae-entries",
        AppendEntries("A", 8, 300, 7, 299, (E1, E2)),
        "03 | 2b | 733363723374 | 41 | 08 | 2c01 | 07 | 2b01 | E1 | E2",
    ),
    (
        "install-snapshot",
        InstallSnapshot("A", 8, 1000, 6, 65536, 100000, b"\xca\xfe"),
        "04 | 24 | 733363723374 | 41 | 08 | e803 | 06 | 000001 | a08601 | cafe",
    ),
    ("request-config", RequestConfig(), "01 | 5e | 733363723374"),
    ("request-log-info", RequestLogInfo(), "02 | 25 | 733363723374"),
    (
        "request-update",
        RequestUpdate(REQID, b"hello"),
        "5956dc8826f27e10dcccab20 | 3d | 733363723374 | 68656c6c6f",
    ),
    ("config-update", ConfigUpdate(REQID, P4), "5956dc8826f27e10dcccab20 | 26 | 733363723374 | P4"),
    ("entries-from-0", RequestEntries(0), "05 | 3c | 733363723374 | 00"),
    ("entries-count", RequestEntries(10, 100), "05 | 3c | 733363723374 | 0a | 64"),
    (
        "entries-offset",
        RequestEntries(0, None, 65536),
        "05 | 3c | 733363723374 | 00 | (empty) | 000001",
    ),
    ("entries-stop", RequestEntries(300, 0), "05 | 3c | 733363723374 | 2c01 | 00"),
    # raftlog's any_peer flag: frame 7, after a valid offset frame (a reference peer decodes
    # frame 6 as a uint and would stop on an empty one; it ignores frame 7)
    (
        "entries-any-peer",
        RequestEntries(10, None, 0, True),
        "05 | 3c | 733363723374 | 0a | (empty) | 00 | 01",
    ),
    (
        "entries-any-peer-ack",
        RequestEntries(20, 5, 65536, True),
        "05 | 3c | 733363723374 | 14 | 05 | 000001 | 01",
    ),
    ("broadcast-url", RequestBroadcastStateUrl(), "06 | 2a | 733363723374"),
]


@pytest.mark.parametrize(
    ("name", "message", "spec"), REQUEST_VECTORS, ids=[v[0] for v in REQUEST_VECTORS]
)
def test_request_vectors(name: str, message: Request, spec: str) -> None:
    wire = frames(spec)
    assert encode_request(message, ident=IDENT, id=wire[0]) == wire
    decoded = decode_request(wire)
    assert (decoded.id, decoded.type, decoded.ident) == (wire[0], wire[1], IDENT)
    assert decoded.message == message


def test_update_requests_default_their_id_to_the_request_id() -> None:
    assert encode_request(RequestUpdate(REQID, b"hello"), ident=IDENT)[0] == REQID
    assert encode_request(ConfigUpdate(REQID, P4), ident=IDENT)[0] == REQID


def test_peer_msgids_encode_like_uint() -> None:
    assert encode_msg_id(1) == frames("01")[0]


# (request type, response, frames) -- frames include the echoed id.
RESPONSE_VECTORS: list[tuple[str, bytes, Response, str]] = [
    ("vote-granted", b"?", RequestVoteResponse(5, True), "01 | 05 | 01"),
    ("vote-denied", b"?", RequestVoteResponse(6, False), "01 | 06 | (empty)"),
    ("ae-success", b"+", AppendEntriesResponse(8, True), "03 | 08 | 01"),
    # a raftlog follower's success: two real uints (the reference's leader decodes frames 4-5
    # as uint and loses an answer with an empty one), then the pipelining mark
    (
        "ae-success-marked",
        b"+",
        AppendEntriesResponse(8, True, pipelines=True),
        "03 | 08 | 01 | 00 | 00 | 726166746c6f673a706970656c696e6573",
    ),
    ("ae-hint", b"+", AppendEntriesResponse(8, False, 251), "03 | 08 | (empty) | fb"),
    ("ae-failure", b"+", AppendEntriesResponse(8, False), "03 | 08 | (empty)"),
    ("is", b"$", InstallSnapshotResponse(8), "04 | 08"),
    ("is-resend", b"$", InstallSnapshotResponse(8, 0), "04 | 08 | 00"),
    ("config-leader", b"^", RequestConfigResponse(True, "A", P1), "01 | 01 | a141 | P1"),
    ("config-no-leader", b"^", RequestConfigResponse(False, None, P1), "01 | (empty) | c0 | P1"),
    (
        "log-info",
        b"%",
        RequestLogInfoResponse(True, "A", 8, 1, 299, 300, 301, 0, 300),
        "02 | 01 | a141 | 08 | 01 | 2b01 | 2c01 | 2d01 | 00 | 2c01",
    ),
    (
        "update-accepted",
        b"=",
        RequestUpdateResponse(REQID, UpdateStatus.ACCEPTED),
        "5956dc8826f27e10dcccab20 | 01",
    ),
    (
        "update-done-301",
        b"=",
        RequestUpdateResponse(REQID, UpdateStatus.DONE, index=301),
        "5956dc8826f27e10dcccab20 | 01 | cd012d",
    ),
    (
        "update-done-2^31",
        b"=",
        RequestUpdateResponse(REQID, UpdateStatus.DONE, index=2**31),
        "5956dc8826f27e10dcccab20 | 01 | cb41e0000000000000",
    ),
    (
        "update-not-leader-B",
        b"=",
        RequestUpdateResponse(REQID, UpdateStatus.NOT_LEADER, leader_id="B"),
        "5956dc8826f27e10dcccab20 | (empty) | a142",
    ),
    (
        "update-not-leader-unknown",
        b"=",
        RequestUpdateResponse(REQID, UpdateStatus.NOT_LEADER),
        "5956dc8826f27e10dcccab20 | (empty) | c0",
    ),
    (
        "update-expired",
        b"=",
        RequestUpdateResponse(REQID, UpdateStatus.EXPIRED),
        "5956dc8826f27e10dcccab20 | (empty)",
    ),
    (
        "cu-accepted",
        b"&",
        ConfigUpdateResponse(REQID, ConfigUpdateStatus.OK),
        "5956dc8826f27e10dcccab20 | 01",
    ),
    (
        "cu-done-302",
        b"&",
        ConfigUpdateResponse(REQID, ConfigUpdateStatus.OK, index=302),
        "5956dc8826f27e10dcccab20 | 01 | cd012e",
    ),
    (
        "cu-not-leader",
        b"&",
        ConfigUpdateResponse(REQID, ConfigUpdateStatus.NOT_LEADER, leader_id="B"),
        "5956dc8826f27e10dcccab20 | 00 | a142",
    ),
    (
        "cu-busy",
        b"&",
        ConfigUpdateResponse(REQID, ConfigUpdateStatus.BUSY),
        "5956dc8826f27e10dcccab20 | 03",
    ),
    (
        "cu-expired",
        b"&",
        ConfigUpdateResponse(REQID, ConfigUpdateStatus.EXPIRED),
        "5956dc8826f27e10dcccab20 | 04",
    ),
    (
        "cu-error",
        b"&",
        ConfigUpdateResponse(
            REQID,
            ConfigUpdateStatus.CONFIG_ERROR,
            error=ConfigUpdateErrorInfo("TypeError", "peers must be an array"),
        ),
        "5956dc8826f27e10dcccab20 | 02 | " + ERROR_HEX,
    ),
    (
        "re-not-leader",
        b"<",
        RequestEntriesResponse(EntriesStatus.NOT_LEADER, leader_id="B"),
        "05 | 00 | a142",
    ),
    (
        "re-more",
        b"<",
        RequestEntriesResponse(EntriesStatus.MORE, last_index=301, entries=(E1, E2)),
        "05 | 02 | c0 | 2d01 | E1 | E2",
    ),
    (
        "re-last-empty",
        b"<",
        RequestEntriesResponse(EntriesStatus.LAST, last_index=300),
        "05 | 01 | c0 | 2c01",
    ),
    (
        "re-snapshot",
        b"<",
        RequestEntriesResponse(
            EntriesStatus.SNAPSHOT, snapshot=SnapshotChunk(0, 100000, 6, 1000, b"\xca\xfe")
        ),
        "05 | 03 | 9300ce000186a006 | e803 | cafe",
    ),
    (
        "re-snapshot-second-chunk",  # from the §10.5 example exchange (offset 65536)
        b"<",
        RequestEntriesResponse(
            EntriesStatus.SNAPSHOT, snapshot=SnapshotChunk(65536, 100000, 6, 1000, b"\x00")
        ),
        "06 | 03 | 93ce00010000ce000186a006 | e803 | 00",
    ),
    (
        "broadcast-url",
        b"*",
        RequestBroadcastStateUrlResponse("tcp://10.0.0.1:8048"),
        "06 | 7463703a2f2f31302e302e302e313a38303438",
    ),
]


@pytest.mark.parametrize(
    ("name", "request_type", "message", "spec"),
    RESPONSE_VECTORS,
    ids=[v[0] for v in RESPONSE_VECTORS],
)
def test_response_vectors(name: str, request_type: bytes, message: Response, spec: str) -> None:
    wire = frames(spec)
    assert encode_response(message, id=wire[0]) == wire
    assert decode_response(request_type, wire) == (wire[0], message)


def test_update_responses_default_their_id_to_the_request_id() -> None:
    accepted = RequestUpdateResponse(REQID, UpdateStatus.ACCEPTED)
    assert encode_response(accepted) == [REQID, b"\x01"]
    assert encode_response(ConfigUpdateResponse(REQID, ConfigUpdateStatus.BUSY)) == [REQID, b"\x03"]


BROADCAST_VECTORS = [
    ("heartbeat", StateBroadcast(8, 301), "733363723374 | 08 | 2d01"),
    ("entries", StateBroadcast(8, 302, (E1, E2)), "733363723374 | 08 | 2e01 | E1 | E2"),
]


@pytest.mark.parametrize(
    ("name", "message", "spec"), BROADCAST_VECTORS, ids=[v[0] for v in BROADCAST_VECTORS]
)
def test_broadcast_vectors(name: str, message: StateBroadcast, spec: str) -> None:
    wire = frames(spec)
    assert encode_broadcast(message, ident=IDENT) == wire
    assert decode_broadcast(wire) == (IDENT, message)


def test_float64_indices_decode_as_integers() -> None:
    """The reference writes numbers >= 2^31 as float64 (§2.3); 2^32 = cb41f0..."""
    wire = frames("5956dc8826f27e10dcccab20 | 01 | cb41f0000000000000")
    assert decode_response(b"=", wire)[1] == RequestUpdateResponse(
        REQID, UpdateStatus.DONE, index=2**32
    )
    wire = frames("5956dc8826f27e10dcccab20 | 01 | cf0000000100000000")  # uint64 form
    assert decode_response(b"&", wire)[1] == ConfigUpdateResponse(
        REQID, ConfigUpdateStatus.OK, index=2**32
    )


JOINT_HEX = (
    "82a36f6c649392a141b37463703a2f2f31302e302e302e313a3830343792a142b37463703a2f2f31302e302e302e32"
    "3a3830343792a143b37463703a2f2f31302e302e302e333a38303437a36e65779492a141b37463703a2f2f31302e30"
    "2e302e313a3830343792a142b37463703a2f2f31302e302e302e323a3830343792a143b37463703a2f2f31302e302e"
    "302e333a3830343792a144b37463703a2f2f31302e302e302e343a38303437"
)


def test_config_payload_vectors() -> None:
    joint = ConfigPayload(new=P4, old=P4[:3])
    assert encode_config_payload(joint).hex() == JOINT_HEX
    assert decode_config_payload(bytes.fromhex(JOINT_HEX)) == joint
    final = ConfigPayload(new=P4)
    assert encode_config_payload(final).hex() == P4_HEX
    assert decode_config_payload(bytes.fromhex(P4_HEX)) == final
    # §4.1 CONFIG entry vector: data [["1","tcp://127.0.0.1:8047"]]
    data = bytes.fromhex("9192a131b47463703a2f2f3132372e302e302e313a38303437")
    one = ConfigPayload(new=(Peer("1", "tcp://127.0.0.1:8047"),))
    assert encode_config_payload(one) == data
    assert decode_config_payload(data) == one


# --- §5.3 dispatch rules, leniency and refusals -----------------------------------------------


@pytest.mark.parametrize(
    ("spec", "frame"),
    [
        ("01 | 3f", None),  # no ident frame
        ("01", None),
        ("01 | (empty) | 733363723374", 1),  # empty type
        ("(empty) | 3f | 733363723374 | 41 | 05 | 2c01 | 04", 0),  # msgid must be 1-3 bytes
        ("01000000 | 2b | 733363723374 | 41 | 08 | 2c01 | 07 | 2b01", 0),
        ("0102 | 3d | 733363723374 | 68656c6c6f", 0),  # reqid must be 12 bytes
        ("5956dc8826f27e10dcccab20 | 3d | 733363723374 | (empty)", 3),  # no data
        ("5956dc8826f27e10dcccab20 | 3d | 733363723374", 3),  # missing data frame
        ("01 | 3f | 733363723374 | 41 | 05 | 2c01", 6),  # 5 instead of 6 argument frames
        ("01 | 3f | 733363723374 | 41 | (empty) | 2c01 | 04", 4),  # empty uint
        ("01 | 3f | 733363723374 | ff | 05 | 2c01 | 04", 3),  # not UTF-8
        ("03 | 2b | 733363723374 | 41 | 08 | 2c01 | 07 | 2b01 | E1 | 00", 9),  # short entry
        ("5956dc8826f27e10dcccab20 | 26 | 733363723374 | 9192a141", 3),  # truncated json
        ("5956dc8826f27e10dcccab20 | 26 | 733363723374 | a141", 3),  # not an array
        ("05 | 3c | 733363723374 | (empty)", 3),
    ],
)
def test_malformed_requests_are_rejected_with_the_frame(spec: str, frame: int | None) -> None:
    with pytest.raises(RemoteProtocolError) as info:
        decode_request(frames(spec))
    assert info.value.frame == frame


def test_other_types_are_client_dispatch_with_their_frames() -> None:
    for msg_type in (b"W", b"??", b"custom", b"\x00"):
        decoded = decode_request([b"\x09", msg_type, IDENT, b"a", b""])
        assert decoded.message == ClientDispatch(msg_type, (b"a", b""))
        assert encode_request(decoded.message, ident=IDENT, id=b"\x09") == [
            b"\x09",
            msg_type,
            IDENT,
            b"a",
            b"",
        ]
    assert decode_response(b"W", [b"\x09", b"url"]) == (b"\x09", ClientDispatchResponse((b"url",)))


def test_trailing_frames_are_ignored_except_entries() -> None:
    wire = frames("01 | 3f | 733363723374 | 41 | 05 | 2c01 | 04 | ff | ff")
    assert decode_request(wire).message == RequestVote("A", 5, 300, 4)
    wire = frames("01 | 5e | 733363723374 | ff")
    assert decode_request(wire).message == RequestConfig()
    # AE response frame 5 (PROTO.md's "conflict index", never sent) is ignored.
    assert decode_response(b"+", frames("03 | 08 | (empty) | fb | 07")) == (
        b"\x03",
        AppendEntriesResponse(8, False, 251),
    )


def test_a_success_never_reads_a_hint_and_only_the_exact_mark_counts() -> None:
    assert decode_response(b"+", frames("03 | 08 | 01 | fb"))[1] == AppendEntriesResponse(8, True)
    near = b"raftlog:pipeline".hex()
    assert decode_response(b"+", frames(f"03 | 08 | 01 | 00 | 00 | {near}"))[1] == (
        AppendEntriesResponse(8, True)
    )
    mark = b"raftlog:pipelines".hex()  # on a rejection the mark means nothing
    assert decode_response(b"+", frames(f"03 | 08 | (empty) | 00 | 00 | {mark}"))[1] == (
        AppendEntriesResponse(8, False, 0)
    )


def test_split_header_lets_a_router_check_the_ident_first() -> None:
    wire = frames("02 | 2b | 733363723374 | 41 | 08 | 2c01 | 07 | 2b01 | E1")
    msg_id, msg_type, ident = split_header(wire)
    assert (msg_id, msg_type, ident) == (b"\x02", b"+", IDENT)
    assert decode_request_args(msg_type, msg_id, wire[3:]) == AppendEntries(
        "A", 8, 300, 7, 299, (E1,)
    )


@pytest.mark.parametrize(
    ("request_type", "spec"),
    [
        (b"^", "01 | 01 | a141"),  # RequestConfig frame 4 is required (§14.2)
        (b"%", "02 | 01 | a141 | 08 | 01 | 2b01 | 2c01 | 2d01 | 00"),  # 9 of 10 frames
        (b"&", "5956dc8826f27e10dcccab20 | 05"),  # unknown status
        (b"&", "0102 | 01"),  # id is not a reqid
        (b"=", "5956dc8826f27e10dcccab20 | 01 | cb3ff8000000000000"),  # index 1.5
        (b"=", "5956dc8826f27e10dcccab20 | 01 | cb4340000000000000"),  # index 2^53
        (b"=", "5956dc8826f27e10dcccab20 | 01 | ff"),  # index -1
        (b"=", "5956dc8826f27e10dcccab20 | (empty) | 01"),  # leader id not a string
        (b"<", "05 | 04 | c0 | 01"),  # unknown status
        (b"<", "05 | 03 | 9300ce000186a006 | e803"),  # snapshot chunk frame missing
        (b"<", "05 | 03 | 920000 | e803 | cafe"),  # triple too short
        (b"<", "05 | 02 | c0"),  # no last index
        (b"<", "05 | 02 | c0 | 2d01 | E1 | 00"),  # bad entry
        (b"?", "01 | 05"),
        (b"$", "04"),
        (b"*", "06 | ff"),
        (b"+", ""),
    ],
)
def test_malformed_responses_are_rejected(request_type: bytes, spec: str) -> None:
    wire = frames(spec) if spec else []
    with pytest.raises(RemoteProtocolError):
        decode_response(request_type, wire)


def test_response_leniency() -> None:
    # [true, nil] is still "accepted"; an empty IS/AE optional frame is "absent".
    wire = frames("5956dc8826f27e10dcccab20 | 01 | c0")
    assert decode_response(b"=", wire)[1] == RequestUpdateResponse(REQID, UpdateStatus.ACCEPTED)
    assert decode_response(b"$", frames("04 | 08 | (empty)"))[1] == InstallSnapshotResponse(8)
    assert decode_response(b"+", frames("03 | 08 | (empty) | (empty)"))[1] == (
        AppendEntriesResponse(8, False)
    )
    # status 0 without its leader frame: leader unknown
    wire = frames("5956dc8826f27e10dcccab20 | 00")
    assert decode_response(b"&", wire)[1] == ConfigUpdateResponse(
        REQID, ConfigUpdateStatus.NOT_LEADER
    )


@pytest.mark.parametrize(
    ("message", "msg_id"),
    [
        (RequestVote("A", 1, 1, 1), None),  # peer RPCs need their msgid
        (RequestVote("A", 1, 1, 1), b"\x01\x02\x03\x04"),  # msgid over 3 bytes
        (RequestConfig(), None),
        (RequestUpdate(REQID, b"x"), b"\x01"),  # its id is its request_id
        (RequestUpdate(REQID, b""), None),  # no data
        (RequestUpdate(b"short", b"x"), None),
        (ClientDispatch(b"?"), b"\x01"),  # a built-in type
        (ClientDispatch(b""), b"\x01"),
        (RequestVote("A", -1, 1, 1), b"\x01"),
        (RequestVote("A", 2**53, 1, 1), b"\x01"),
    ],
)
def test_encoding_the_inexpressible_is_a_local_error(
    message: Request, msg_id: bytes | None
) -> None:
    with pytest.raises(LocalProtocolError):
        encode_request(message, ident=IDENT, id=msg_id)


@pytest.mark.parametrize(
    "message",
    [
        RequestUpdateResponse(REQID, UpdateStatus.DONE),  # no index
        RequestUpdateResponse(REQID, UpdateStatus.DONE, index=2**53),
        ConfigUpdateResponse(REQID, ConfigUpdateStatus.CONFIG_ERROR),  # no error info
        RequestEntriesResponse(EntriesStatus.MORE),  # no last index
        RequestEntriesResponse(EntriesStatus.SNAPSHOT),  # no chunk
    ],
)
def test_encoding_incomplete_responses_is_a_local_error(message: Response) -> None:
    with pytest.raises(LocalProtocolError):
        encode_response(message, id=b"\x01")
    with pytest.raises(LocalProtocolError):
        encode_response(RequestVoteResponse(1, True))  # id required


def test_a_transfer_request_vote_carries_frame_8_and_plain_ones_do_not() -> None:
    """The transfer mark is one trailing frame the reference ignores (§5.3)."""
    plain = encode_request(RequestVote("n1", 4, 10, 3), ident=b"ID", id=b"\x01")
    marked = encode_request(RequestVote("n1", 4, 10, 3, transfer=True), ident=b"ID", id=b"\x01")
    assert marked[:-1] == plain and marked[-1] == b"\x01"
    assert decode_request(marked).message == RequestVote("n1", 4, 10, 3, transfer=True)
    assert decode_request(plain).message == RequestVote("n1", 4, 10, 3)
    # any other seventh frame is no mark (a peer never fails on what the network sends)
    assert decode_request([*plain, b"\xff"]).message == RequestVote("n1", 4, 10, 3)
