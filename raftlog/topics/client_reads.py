"""Topic reads at a consistency level (issue #29; docs/client.md, "Read consistency").

``TopicClient.read`` sends its ``TR`` request through :func:`read_frames`: the level's keys
are added to the body (``raftlog.topics.wire_reads``), a linearizable read from a named peer
first fetches the leader's read index (``RI``) and sends it as the minimum, and a peer that
refuses the level (``NotServed``: it could not apply the index in time, or it does not lead)
is left for the leader, which has applied everything it acknowledged.
"""

from __future__ import annotations

from collections.abc import Sequence

from raftlog.client.client import RaftClient
from raftlog.client.consistency import ReadLevel
from raftlog.client.routing import Done, Outcome, Redirect
from raftlog.topics import wire as rpc
from raftlog.topics.wire_reads import not_served_leader, with_level


async def read_frames(
    client: RaftClient,
    request: rpc.ReadRequest,
    level: ReadLevel,
    url: str | None,
    *,
    timeout: float | None,
    patience: float,
) -> Sequence[bytes]:
    """The answer frames (after the id) of ``request`` at ``level``, from ``url`` (None:
    the leader); a ``NotServed`` refusal from ``url`` is retried at the leader."""
    if url is not None and level.linearizable:
        level = await level.for_follower()
    args = with_level(
        rpc.encode_read_request(request),
        min_index=level.min_index,
        linearizable=level.linearizable,
    )
    if url is not None:
        frames = await client.peer_request(
            url, rpc.TYPE_READ, args, timeout=timeout, patience=patience
        )
        if not not_served_leader(frames)[0]:
            return frames

    def interpret(frames: list[bytes], _url: str) -> Outcome[list[bytes]]:
        refused, leader = not_served_leader(frames)
        return Redirect(leader) if refused else Done(frames)

    return await client.leader_request(rpc.TYPE_READ, args, interpret, timeout=timeout)
