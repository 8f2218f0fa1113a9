"""decode(encode(m)) == m for every message type (hypothesis), requests, responses,
broadcasts and ClientDispatch alike."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from rpc_strategies import broadcasts, idents, requests, responses

from raftlog.rpc.codec import (
    decode_broadcast,
    decode_request,
    decode_request_args,
    encode_broadcast,
    split_header,
)
from raftlog.rpc.config import decode_config_payload, encode_config_payload
from raftlog.rpc.frames import decode_msg_id, encode_msg_id
from raftlog.rpc.messages import (
    AppendEntries,
    ConfigPayload,
    ConfigUpdate,
    ConfigUpdateResponse,
    InstallSnapshot,
    Peer,
    Request,
    RequestUpdate,
    RequestUpdateResponse,
    RequestVote,
    Response,
    StateBroadcast,
)
from raftlog.rpc.request_encoders import encode_request
from raftlog.rpc.response_decoders import decode_response
from raftlog.rpc.responses import encode_response

ROUNDTRIP = settings(max_examples=150, deadline=None)


def _id_for(message: Request, data: st.DataObject) -> bytes | None:
    if isinstance(message, RequestUpdate | ConfigUpdate):
        return None
    if isinstance(message, RequestVote | AppendEntries | InstallSnapshot):
        return encode_msg_id(data.draw(st.integers(0, 2**24 - 1)))
    return data.draw(st.binary(max_size=13))


@ROUNDTRIP
@given(requests, idents, st.data())
def test_requests_round_trip(message: Request, ident: bytes, data: st.DataObject) -> None:
    msg_id = _id_for(message, data)
    frames = encode_request(message, ident=ident, id=msg_id)
    decoded = decode_request(frames)
    assert decoded.message == message
    assert decoded.ident == ident
    if isinstance(message, RequestUpdate | ConfigUpdate):
        assert decoded.id == message.request_id
    else:
        assert decoded.id == msg_id
    # The two-step path a router uses gives the same result.
    header = split_header(frames)
    assert header == (decoded.id, decoded.type, ident)
    assert decode_request_args(header[1], header[0], frames[3:]) == message
    if isinstance(message, RequestVote | AppendEntries | InstallSnapshot):
        assert encode_msg_id(decode_msg_id(decoded.id)) == decoded.id


@ROUNDTRIP
@given(responses, st.binary(max_size=13))
def test_responses_round_trip(pair: tuple[bytes, Response], msg_id: bytes) -> None:
    request_type, message = pair
    if isinstance(message, RequestUpdateResponse | ConfigUpdateResponse):
        frames = encode_response(message)
        assert frames[0] == message.request_id
    else:
        frames = encode_response(message, id=msg_id)
        assert frames[0] == msg_id
    assert decode_response(request_type, frames) == (frames[0], message)


@ROUNDTRIP
@given(broadcasts, idents)
def test_broadcasts_round_trip(message: StateBroadcast, ident: bytes) -> None:
    assert decode_broadcast(encode_broadcast(message, ident=ident)) == (ident, message)


def _valid_peers(count: int, first: int) -> tuple[Peer, ...]:
    return tuple(
        Peer(f"p{n}", f"tcp://10.0.{n // 250}.{n % 250 + 1}:8047")
        for n in range(first, first + count)
    )


@ROUNDTRIP
@given(st.integers(1, 7), st.integers(0, 7), st.booleans())
def test_config_payloads_round_trip(size: int, shift: int, joint: bool) -> None:
    new = _valid_peers(size, shift)
    payload = ConfigPayload(new=new, old=_valid_peers(size, 0) if joint else None)
    assert decode_config_payload(encode_config_payload(payload)) == payload
