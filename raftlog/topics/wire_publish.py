"""The ``TP`` publish answer (docs/protocol.md §10.6): its shape and its pure frame codecs.

Why a module of its own: the publish answer is the one topic answer the peer's update path
builds (``raftlog.server.client_service``, ``raftlog.server.replies``) -- the server imports
it without the read, describe and list codecs of ``raftlog.topics.wire``.

``TP`` publish -- leader only; exactly RequestUpdate (§10.3) plus one answer:

    request   [reqid(12), "TP", ident, data]          data: a topic entry (raftlog.topics.records)
    response  [reqid, 01]                             accepted, not yet applied (interim)
              [reqid, 01, json index]                 done: the entry's log index
              [reqid, "", json leader-id | nil]       not the leader
              [reqid, ""]                             request id expired (§3.1)
              [reqid, "", nil, json error]            refused, nothing appended (final)

  The id frame *is* the request id: retrying with the same id never appends twice, and the
  answers come from the same code as RequestUpdate's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from raftlog.errors import LocalProtocolError, RemoteProtocolError
from raftlog.rpc.frames import (
    FALSE_FRAME,
    JSON_NULL,
    TRUE_FRAME,
    decode_bool,
    decode_json,
    json_to_uint,
    pack_json,
)
from raftlog.topics.records import TopicError
from raftlog.topics.wire_errors import error_from, error_map


class PublishStatus(StrEnum):
    """Outcome of ``TP`` (a ``StrEnum``: compares equal to the strings it replaced)."""

    ACCEPTED = "accepted"
    DONE = "done"
    NOT_LEADER = "not_leader"
    EXPIRED = "expired"
    REJECTED = "rejected"


@dataclass(frozen=True, slots=True)
class PublishReply:
    """One answer to ``TP``; ``final`` unless ACCEPTED. DONE carries ``index``, NOT_LEADER
    ``leader_id`` (None when unknown), REJECTED ``error``."""

    status: PublishStatus
    index: int | None = None
    leader_id: str | None = None
    error: TopicError | None = None

    @property
    def final(self) -> bool:
        """Whether no further answer follows."""
        return self.status is not PublishStatus.ACCEPTED


def encode_publish_rejection(error: TopicError) -> list[bytes]:
    """The frames after the reqid of a refused publish."""
    return [FALSE_FRAME, JSON_NULL, pack_json(error_map(error))]


def encode_publish_reply(reply: PublishReply) -> list[bytes]:
    """The frames after the reqid of a ``TP`` answer (RequestUpdate's, plus REJECTED)."""
    status = reply.status
    if status is PublishStatus.ACCEPTED:
        return [TRUE_FRAME]
    if status is PublishStatus.DONE:
        if reply.index is None:
            raise LocalProtocolError("a DONE publish answer needs the index")
        return [TRUE_FRAME, pack_json(reply.index)]
    if status is PublishStatus.NOT_LEADER:
        return [FALSE_FRAME, pack_json(reply.leader_id)]
    if status is PublishStatus.EXPIRED:
        return [FALSE_FRAME]
    if reply.error is None:
        raise LocalProtocolError("a REJECTED publish answer needs the error")
    return encode_publish_rejection(reply.error)


def decode_publish_reply(frames: Sequence[bytes]) -> PublishReply:
    """The frames after the reqid of a ``TP`` answer."""
    if not frames or len(frames) > 3:
        raise RemoteProtocolError(f"a publish answer has 1-3 frames, got {len(frames)}")
    if decode_bool(frames[0]):
        if len(frames) == 1:
            return PublishReply(PublishStatus.ACCEPTED)
        if len(frames) == 2:
            index = json_to_uint(decode_json(frames[1], 1), 1, "index")
            return PublishReply(PublishStatus.DONE, index)
        raise RemoteProtocolError("a positive publish answer has at most two frames")
    if len(frames) == 1:
        return PublishReply(PublishStatus.EXPIRED)
    leader = decode_json(frames[1], 1)
    if len(frames) == 3:
        error = error_from(decode_json(frames[2], 2), 2)
        return PublishReply(PublishStatus.REJECTED, error=error)
    if leader is not None and not isinstance(leader, str):
        raise RemoteProtocolError("leader id must be a string or nil", 1)
    return PublishReply(PublishStatus.NOT_LEADER, leader_id=leader)
