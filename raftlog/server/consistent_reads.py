"""``ConsistentReads``: the read consistency levels of one peer (docs/client.md, "Read
consistency"; issue #29).

Every read API (raw RequestEntries, topic ``TR`` reads, the REST poll and the Spark source
over ``TR``) may ask for one of three levels:

* ``any`` -- served at once from this peer's applied state (today's follower read);
* ``read_your_writes`` -- a *minimum index*: served once this peer has applied it (the
  client passes the last index it wrote). A lagging follower holds the read until it catches
  up, at most ``READ_WAIT_S``; then it refuses ("not leader", naming the leader) and the
  client goes to the leader, which has applied everything it acknowledged;
* ``linearizable`` -- ReadIndex: on the leader, the consensus core confirms leadership with a
  heartbeat round after the read arrived (``RaftCore.read_index``), and the read is served
  once the recorded index is applied. A follower asks the leader for its read index with
  ``RI`` over its peer channel (``PeerChannels.ask``), then waits until it has applied it.
  (raftlog's clients fetch the read index themselves and send it as the minimum index.)

``RI`` (read index): ``[id, "RI", ident]`` -> ``[id, 01, uint index]`` once the leader has
confirmed it, ``[id, "", leader-id]`` from a peer that does not lead (or stopped leading
before a quorum confirmed it).

Everything runs on the consensus thread (handlers, ``on_applied`` through the peer's
``ApplySignal`` listener, ``sweep`` on each timer pass, ``on_event`` for the core's
ReadIndex events): no locks.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final, Protocol

from raftlog.consensus.ready import Event, ReadIndexFailed, ReadIndexReady
from raftlog.errors import RemoteProtocolError
from raftlog.rpc.frames import FALSE_FRAME, TRUE_FRAME
from raftlog.rpc.messages import ClientDispatch, ClientDispatchResponse
from raftlog.rpc.reads import TYPE_READ_INDEX, decode_read_index_answer, encode_read_index_answer
from raftlog.server.interfaces import Replies

READ_WAIT_S: Final = 2.0
"""How long a read waits for this peer to apply its minimum (or read) index before it is
refused: long enough for a follower a few batches behind, short enough that a client whose
follower is cut off goes to the leader well within its own timeout."""
MAX_WAITING: Final = 10_000
"""Reads held at once; more are refused at once (the client retries at the leader)."""


Ask = Callable[[str, bytes, Sequence[bytes], Callable[[list[bytes]], None]], bool]
"""Send an extension request to a peer by id (``PeerChannels.ask``); False: no channel."""


class ReadIndexCore(Protocol):
    """What the consensus core offers (``RaftCore``)."""

    def read_index(self, context: object) -> bool:
        """Queue a linearizable read; False when this peer does not lead."""
        ...

    @property
    def leader_id(self) -> str | None:
        """The leader this peer knows, if any."""
        ...


class Applied(Protocol):
    """This peer's state machine progress."""

    @property
    def last_applied(self) -> int:
        """The last index applied."""
        ...


@dataclass(slots=True)
class _Confirming:
    confirmed: Callable[[int], None]
    refuse: Callable[[str | None], None]
    deadline: float


@dataclass(slots=True)
class _Wait:
    index: int
    deadline: float
    serve: Callable[[], None]
    refuse: Callable[[str | None], None]


class ConsistentReads:
    """The reads of one peer waiting for an index or for a leadership confirmation."""

    def __init__(
        self,
        core: ReadIndexCore,
        machine: Applied,
        replies: Replies,
        *,
        clock: Callable[[], float] = time.monotonic,
        wait_s: float = READ_WAIT_S,
        ask: Ask | None = None,
    ) -> None:
        self._core = core
        self._machine = machine
        self._replies = replies
        self._clock = clock
        self._wait_s = wait_s
        self._ask = ask
        self._waits: list[_Wait] = []
        self._confirming: dict[int, _Confirming] = {}
        self._ids = itertools.count(1)

    @property
    def waiting(self) -> int:
        """Reads held now (waiting for an index or a confirmation)."""
        return len(self._waits) + len(self._confirming)

    def after(
        self, index: int, serve: Callable[[], None], refuse: Callable[[str | None], None]
    ) -> None:
        """Run ``serve`` once this peer has applied ``index`` (at once when it has); after
        ``wait_s`` without it, ``refuse(leader_id)``."""
        if self._machine.last_applied >= index:
            serve()
        elif len(self._waits) >= MAX_WAITING:
            refuse(self._core.leader_id)
        else:
            self._waits.append(_Wait(index, self._clock() + self._wait_s, serve, refuse))

    def read_index(
        self,
        confirmed: Callable[[int], None],
        refuse: Callable[[str | None], None],
        *,
        forward: bool = True,
    ) -> None:
        """ReadIndex: ``confirmed(index)`` once leadership was confirmed after this call --
        by this peer's core when it leads, else (``forward``) by the leader it knows, asked
        with ``RI``; ``refuse(leader_id)`` when neither can (in time)."""
        if self.waiting >= MAX_WAITING:
            refuse(self._core.leader_id)
            return
        ticket = next(self._ids)
        leader = self._core.leader_id
        if not self._core.read_index(ticket) and (
            not forward
            or self._ask is None
            or leader is None
            or not self._ask(leader, TYPE_READ_INDEX, [], lambda f: self._forwarded(ticket, f))
        ):
            refuse(leader)
            return
        # Confirmed by the core or by the leader (``RI`` over the peer channel). A leader cut
        # off from every follower keeps believing it leads (and its core keeps the read)
        # until it hears of a higher term: the client is answered after wait_s.
        self._confirming[ticket] = _Confirming(confirmed, refuse, self._clock() + self._wait_s)

    def linearizable(
        self, serve: Callable[[], None], refuse: Callable[[str | None], None]
    ) -> None:
        """A linearizable read served here: ReadIndex, then wait until it is applied."""
        self.read_index(lambda index: self.after(index, serve, refuse), refuse)

    def gate(
        self,
        *,
        min_index: int,
        linearizable: bool,
        serve: Callable[[], None],
        refuse: Callable[[str | None], None],
    ) -> None:
        """Serve a read at the level it asks for (both may be given: the higher bound)."""
        if linearizable:
            self.linearizable(lambda: self.after(min_index, serve, refuse), refuse)
        elif min_index:
            self.after(min_index, serve, refuse)
        else:
            serve()

    def _forwarded(self, ticket: int, frames: list[bytes]) -> None:
        """The leader's answer to the ``RI`` this follower sent for ``ticket``."""
        pending = self._confirming.pop(ticket, None)
        if pending is None:
            return  # refused already: its wait ended
        try:
            answer = decode_read_index_answer(frames)
        except RemoteProtocolError:
            answer = self._core.leader_id
        if isinstance(answer, int):
            pending.confirmed(answer)
        else:
            pending.refuse(answer)

    # -- the RI request -------------------------------------------------------------------
    def request_read_index(self, routing: bytes, msg_id: bytes, message: ClientDispatch) -> None:
        """``RI``: the leader's confirmed read index (a follower's or a client's)."""

        def confirmed(index: int) -> None:
            answer = ClientDispatchResponse((TRUE_FRAME, *encode_read_index_answer(index)))
            self._replies.reply(routing, msg_id, answer)

        def refuse(leader_id: str | None) -> None:
            frames = (FALSE_FRAME, (leader_id or "").encode())
            self._replies.reply(routing, msg_id, ClientDispatchResponse(frames))

        self.read_index(confirmed, refuse, forward=False)  # never a chain of followers

    # -- driven by the peer's loop ------------------------------------------------------------
    def on_event(self, event: Event) -> bool:
        """A core event; True when it was a ReadIndex answer (handled here)."""
        if isinstance(event, ReadIndexReady):
            pending = self._confirming.pop(event.context, None)  # type: ignore[call-overload]
            if pending is not None:  # None: refused already (its wait ended)
                pending.confirmed(event.index)
            return True
        if isinstance(event, ReadIndexFailed):
            pending = self._confirming.pop(event.context, None)  # type: ignore[call-overload]
            if pending is not None:
                pending.refuse(event.leader_id)
            return True
        return False

    def on_applied(self, index: int) -> None:
        """A batch was applied: serve the reads whose index it reached."""
        if not self._waits:
            return
        ready = [w for w in self._waits if w.index <= index]
        if ready:
            self._waits = [w for w in self._waits if w.index > index]
            for wait in ready:
                wait.serve()

    def sweep(self, now: float) -> None:
        """Refuse the reads whose wait ended (each timer pass): those waiting for an index
        and those whose leadership confirmation did not come in time."""
        leader = self._core.leader_id
        late = [t for t, c in self._confirming.items() if c.deadline <= now]
        for ticket in late:
            self._confirming.pop(ticket).refuse(leader)
        if not self._waits:
            return
        expired = [w for w in self._waits if w.deadline <= now]
        if expired:
            self._waits = [w for w in self._waits if w.deadline > now]
            for wait in expired:
                wait.refuse(leader)
