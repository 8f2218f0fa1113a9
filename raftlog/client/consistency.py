"""Client side of the read consistency levels (docs/client.md, "Read consistency"; #29).

A read asks for a :class:`~raftlog.rpc.reads.Consistency`; :func:`read_level` turns it into
what goes on the wire:

* ``any``: nothing (today's reads, byte for byte);
* ``read_your_writes``: a minimum index -- by default the highest index this client wrote
  in its session (``RaftClient.last_written``; ``TopicClient`` publishes count too);
* ``linearizable``: to the leader, the ``linearizable`` flag (the leader runs ReadIndex);
  to a follower, first ``RI`` to the leader (:func:`read_index`), then that index as the
  minimum -- the follower serves once it has applied it, so the read sees every write
  acknowledged before it began without the follower making a read index of its own.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from raftlog.client.routing import Done, Outcome, Redirect
from raftlog.rpc.reads import TYPE_READ_INDEX, Consistency, decode_read_index_answer


class Session(Protocol):
    """What a read level needs of its client (``RaftClient``): the last index it wrote,
    and a request to the leader."""

    last_written: int

    async def leader_request(
        self,
        msg_type: bytes,
        args: Sequence[bytes],
        interpret: Callable[[list[bytes], str], Outcome[int]],
        *,
        timeout: float | None = None,
    ) -> int:
        """Send to the leader until ``interpret`` gives a final answer."""
        ...


@dataclass(frozen=True, slots=True)
class ReadLevel:
    """What a read carries on the wire for its consistency level."""

    min_index: int = 0
    """Serve once this index is applied (0: no minimum)."""
    linearizable: bool = False
    """Ask for ReadIndex (to the leader; to a follower see ``read_index``)."""
    read_index: Callable[[], Awaitable[int]] | None = None
    """For a linearizable read from a follower: fetch the leader's read index first."""

    @property
    def is_any(self) -> bool:
        """True when the read asks for nothing (an ``any`` read)."""
        return not self.min_index and not self.linearizable

    async def for_follower(self) -> ReadLevel:
        """The level to send to a follower: a linearizable read becomes the leader's read
        index as the minimum (``RI``), since only the leader can confirm leadership."""
        if not self.linearizable or self.read_index is None:
            return self
        index = await self.read_index()
        return ReadLevel(max(self.min_index, index), False, None)


def read_level(
    client: Session, consistency: str | Consistency, min_index: int | None = None
) -> ReadLevel:
    """The wire level of a read at ``consistency`` (``ValueError`` for an unknown level or a
    negative ``min_index``). ``min_index`` defaults to the client's last written index for
    ``read_your_writes`` and is added to the others when given."""
    level = Consistency.parse(consistency)
    if min_index is not None and min_index < 0:
        raise ValueError("min_index must not be negative")
    if level is Consistency.ANY:
        return ReadLevel(min_index or 0)
    if level is Consistency.READ_YOUR_WRITES:
        return ReadLevel(client.last_written if min_index is None else min_index)
    return ReadLevel(min_index or 0, True, lambda: read_index(client))


async def read_index(client: Session, *, timeout: float | None = None) -> int:
    """``RI``: the leader's read index, confirmed by a heartbeat round after this call
    began. Every write acknowledged before the call is at or below it."""

    def interpret(frames: list[bytes], url: str) -> Outcome[int]:
        answer = decode_read_index_answer(frames)  # RemoteProtocolError: malformed, waits on
        if isinstance(answer, int):
            return Done(answer)
        return Redirect(answer)

    return await client.leader_request(TYPE_READ_INDEX, [], interpret, timeout=timeout)
