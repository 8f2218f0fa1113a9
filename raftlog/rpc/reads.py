"""Read consistency levels on the wire (issue #29; docs/protocol.md §10.5, §10.7).

``RI`` -- the leader's read index (ReadIndex, Raft thesis §6.4):

    request   [id, "RI", ident]
    response  [id, 01, uint index]       the leader confirmed, after the request arrived, that
                                         it still leads; everything acknowledged before is at
                                         or below ``index``
              [id, "", leader-id]        not the leader (empty: unknown), or it stopped
                                         leading before a quorum confirmed

A raftlog extension (two-byte type, §10.6): a reference peer does not answer it (the client
then times out on that peer and tries the next). RequestEntries carries the level in two
optional frames after ``any_peer`` (``raftlog.rpc.codec``), topic reads in their JSON body
(``raftlog.topics.wire``).
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from typing import Final

from raftlog.errors import RemoteProtocolError
from raftlog.rpc.frames import TRUE_FRAME, decode_uint, encode_uint

TYPE_READ_INDEX: Final = b"RI"


class Consistency(enum.StrEnum):
    """How fresh a read must be (docs/client.md, "Read consistency")."""

    ANY = "any"
    """Whatever the serving peer has applied (no guarantee of freshness)."""
    READ_YOUR_WRITES = "read_your_writes"
    """At least a minimum index (by default the last index this client wrote)."""
    LINEARIZABLE = "linearizable"
    """Every write acknowledged before the read began (ReadIndex)."""

    @classmethod
    def parse(cls, value: str | Consistency) -> Consistency:
        """The level named ``value`` (``ValueError`` naming the choices otherwise)."""
        try:
            return cls(value)
        except ValueError:
            choices = ", ".join(level.value for level in cls)
            raise ValueError(f"unknown consistency {value!r} (choose one of {choices})") from None


def encode_read_index_answer(index: int) -> list[bytes]:
    """The frames after the success flag of an ``RI`` answer."""
    return [encode_uint(index)]


def decode_read_index_answer(frames: Sequence[bytes]) -> int | str | None:
    """An ``RI`` answer (after the id): the read index (int), or the leader id a refusing
    peer named (str; None when it knows none). ``RemoteProtocolError`` when malformed."""
    if not frames:
        raise RemoteProtocolError("an RI answer has at least one frame", 1)
    if frames[0] == TRUE_FRAME:
        if len(frames) != 2:
            raise RemoteProtocolError(f"an RI answer has two frames, got {len(frames)}", 1)
        return decode_uint(frames[1], 2)
    if frames[0] != b"":
        raise RemoteProtocolError("an RI answer starts with 01 or an empty frame", 1)
    leader = bytes(frames[1]).decode("utf-8", "replace") if len(frames) > 1 else ""
    return leader or None
