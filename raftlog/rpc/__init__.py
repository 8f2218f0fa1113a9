"""The ØMQ RAFT wire format: typed messages (``messages``) and pure frame codecs.

The public codec API is re-exported here; see :mod:`raftlog.rpc.codec` (request decoding and
broadcasts), :mod:`raftlog.rpc.request_encoders`, :mod:`raftlog.rpc.responses` (answers),
:mod:`raftlog.rpc.response_decoders`,
:mod:`raftlog.rpc.frames` (primitives) and :mod:`raftlog.rpc.config` (peer lists and CONFIG
payloads).
"""

from raftlog.rpc.codec import (
    DecodedRequest,
    decode_broadcast,
    decode_request,
    decode_request_args,
    encode_broadcast,
    split_header,
)
from raftlog.rpc.config import (
    check_config_update,
    decode_config_payload,
    encode_config_payload,
    parse_peers,
    validate_peer_url,
)
from raftlog.rpc.frames import decode_msg_id, encode_msg_id, next_msg_id
from raftlog.rpc.request_encoders import encode_request
from raftlog.rpc.response_decoders import decode_response
from raftlog.rpc.responses import encode_response

__all__ = [
    "DecodedRequest",
    "check_config_update",
    "decode_broadcast",
    "decode_config_payload",
    "decode_msg_id",
    "decode_request",
    "decode_request_args",
    "decode_response",
    "encode_broadcast",
    "encode_config_payload",
    "encode_msg_id",
    "encode_request",
    "encode_response",
    "next_msg_id",
    "parse_peers",
    "split_header",
    "validate_peer_url",
]
