"""Read consistency of ``TR`` topic reads (issue #29; the level itself: ``raftlog.rpc.reads``).

A ``TR`` request body (``raftlog.topics.wire``) may carry two more keys:

* ``min_index`` (uint): serve once the peer has applied this index (read-your-writes);
* ``linearizable`` (true): ReadIndex first -- the leader's own, or a follower asks the
  leader for its read index (``RI``) and serves once it has applied it.

The peer takes them off before the topic machine reads the request (so the machine's codec
and its checks stay as they are) and holds the read until the level is met. A peer that
cannot meet it within its read wait answers the error ``NotServed`` whose map carries
``leader`` (the leader it knows, or nil): the client retries there. An older raftlog peer
refuses the unknown keys with ``BadRequest``; a reference peer has no topics at all.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from raftlog.errors import RemoteProtocolError
from raftlog.rpc.frames import FALSE_FRAME, decode_json, pack_json
from raftlog.rpc.messages import ClientDispatch

NOT_SERVED: Final = "NotServed"
"""The error name of a read refused for its consistency level."""
_LEVEL_KEYS: Final = ("min_index", "linearizable")


def with_level(frames: list[bytes], *, min_index: int, linearizable: bool) -> list[bytes]:
    """The argument frames of a ``TR`` request (``encode_read_request``) with a level added
    (unchanged for ``any``: a request without the keys is what it always was)."""
    if not min_index and not linearizable:
        return frames
    body = decode_json(frames[0], 3)
    if not isinstance(body, dict):  # pragma: no cover - encode_read_request makes a map
        raise ValueError("a read request body is a map")
    if min_index:
        body["min_index"] = min_index
    if linearizable:
        body["linearizable"] = True
    return [pack_json(body), *frames[1:]]


def read_level(message: ClientDispatch) -> tuple[int, bool, ClientDispatch] | None:
    """The level a ``TR`` request asks for and the request without it; None when it asks
    for none (or is malformed: the topic machine then answers its error as before)."""
    if len(message.args) != 1:
        return None
    try:
        body = decode_json(message.args[0], 3)
    except RemoteProtocolError:
        return None
    if not isinstance(body, dict) or not any(key in body for key in _LEVEL_KEYS):
        return None
    min_index = body.pop("min_index", 0)
    linearizable = body.pop("linearizable", False)
    if type(min_index) is float and min_index.is_integer():
        min_index = int(min_index)  # numbers >= 2^31 travel as float64
    if type(min_index) is not int or min_index < 0 or type(linearizable) is not bool:
        return None  # the machine refuses the unknown keys: a bad request
    stripped = ClientDispatch(message.type, (pack_json(body),))
    return min_index, linearizable, stripped


def encode_not_served(leader_id: str | None) -> list[bytes]:
    """The error answer of a read whose level this peer cannot meet."""
    error = {
        "name": NOT_SERVED,
        "message": "this peer cannot serve the read at its consistency level in time",
        "leader": leader_id,
    }
    return [FALSE_FRAME, pack_json(error)]


def not_served_leader(frames: Sequence[bytes]) -> tuple[bool, str | None]:
    """Is this ``TR`` answer (after the id) a ``NotServed`` refusal, and which leader did
    it name?"""
    if len(frames) != 2 or frames[0] != FALSE_FRAME:
        return False, None
    try:
        body = decode_json(frames[1], 1)
    except RemoteProtocolError:
        return False, None
    if not isinstance(body, dict) or body.get("name") != NOT_SERVED:
        return False, None
    leader = body.get("leader")
    return True, leader if isinstance(leader, str) and leader else None
