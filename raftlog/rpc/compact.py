"""``AC`` compact: a raftlog extension asking one peer to snapshot and drop its log prefix now.

    request   [id, "AC", ident]
    response  [id, uint index]      the new snapshot's index, or 0: nothing could be compacted

Entries whose request ids are still remembered (``request_id_ttl``) stay in the log so that
retries remain idempotent, so 0 is a normal answer on a young log. Any peer answers for
itself (compaction is local to each peer); ``raftlog-admin compact`` asks each in turn.
Reference (zmq-raft) peers do not know the type and stay silent.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from raftlog.errors import RemoteProtocolError
from raftlog.rpc.frames import decode_uint, encode_uint

TYPE_COMPACT: Final = b"AC"


def encode_compact_response(index: int | None) -> list[bytes]:
    """The frames after the id of a compaction answer (None: nothing compacted)."""
    return [encode_uint(index or 0)]


def decode_compact_response(frames: Sequence[bytes]) -> int | None:
    """The snapshot index from the frames after the id, None when nothing was compacted."""
    if len(frames) != 1:
        raise RemoteProtocolError(f"a compaction answer has 1 frame, got {len(frames)}")
    index = decode_uint(frames[0], 1)
    return index or None
