"""``ClusterLink``: the client's view of the cluster and the retry procedure (docs/protocol.md §13).

On the sockets of :class:`~raftlog.client.connections.Connections` (one DEALER per peer URL,
request ids, reachability), it keeps the peer list learned from RequestConfig answers, the
known leader and the leader discovery, and implements the reference client's recovery
procedure:

* no leader known: RequestConfig to the peers in turn until one answers ``is_leader``,
  following "the leader is X" hints, waiting ``election_grace`` when nobody knows a leader;
  one discovery runs at a time and every concurrent call waits for it;
* leader-only RPCs go to the leader's connection only (the reference narrows its socket to
  the leader's URL); a "not leader" answer switches to the named leader, or forgets the
  leader and waits ``election_grace`` when none is named;
* ``response_timeout`` of silence (interim answers restart it) forgets the leader and resends
  the *same* frames (same reqid for updates) through a new discovery, which starts at the
  peer after the silent one;
* every call has an overall deadline; running past it raises ``ClusterUnavailableError``
  listing what each peer answered during the call, and the likely cause
  (:mod:`raftlog.client.report`);
* fail fast: when every peer has refused connections for ``refused_timeout`` seconds (the
  socket monitor tells, see :class:`~raftlog.client.dealer.ConnectionState`), a call stops
  at once with ``ClusterUnavailableError`` instead of waiting out its deadline.

The same machinery serves any request, not only the core RPCs: :meth:`ClusterLink.leader_call`
takes the encoded frames and an interpreter of the raw answer frames (topic publishes and
reads use it), :meth:`ClusterLink.peer_call` asks one given peer (per-peer status,
compaction). Nothing else in the client opens a request socket.

Design note: the reference uses a single round-robin DEALER connected to all peers. One
DEALER per peer gives the same wire behaviour but lets the client know which peer got which
message (for the error report), and one slow request never reconnects the socket under the
other requests in flight. Idle connections to non-leaders stay open until ``aclose``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final, Generic, TypeAlias, TypeVar

import zmq.asyncio

from raftlog.client.connections import REFUSAL_POLL, Connections
from raftlog.client.dealer import (
    CLOSED,
    Inbox,
    cancel_and_wait,
    next_delivery,
    raise_if_denied,
)
from raftlog.errors import (
    ClientClosedError,
    ClusterUnavailableError,
    QuotaExceededError,
    RemoteProtocolError,
)
from raftlog.rpc import decode_response, encode_request
from raftlog.rpc.denied import quota_refusal_of
from raftlog.rpc.messages import (
    Peer,
    Request,
    RequestConfig,
    RequestConfigResponse,
    Response,
)
from raftlog.security.settings import CurveClient

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Done(Generic[T]):
    """Final answer of a leader RPC."""

    value: T


@dataclass(frozen=True, slots=True)
class Redirect:
    """ "Not leader": ``leader_id`` is the responder's idea of the leader, if any."""

    leader_id: str | None


class Wait:
    """Interim answer ("accepted"): keep waiting, restart the response timeout."""


WAIT: Final = Wait()
Outcome: TypeAlias = Done[T] | Redirect | Wait
Interpreter: TypeAlias = Callable[[list[bytes], str], "Outcome[T]"]
"""Turns the frames of an answer (id frame first) and the URL it came from into an outcome,
or raises a final error; ``RemoteProtocolError`` marks the answer malformed (skipped)."""


class ClusterLink(Connections):
    """Leader tracking and the retry loop shared by every client call, on the
    :class:`~raftlog.client.connections.Connections` to the peers."""

    def __init__(
        self,
        seeds: Sequence[str],
        ident: bytes,
        *,
        response_timeout: float,
        election_grace: float,
        refused_timeout: float,
        context: zmq.asyncio.Context | None = None,
        curve: CurveClient | None = None,
    ) -> None:
        super().__init__(
            seeds,
            ident,
            response_timeout=response_timeout,
            refused_timeout=refused_timeout,
            context=context,
            curve=curve,
        )
        self.election_grace = election_grace
        self._peers: dict[str, str] = {}
        self.leader: Peer | None = None
        self._rr = len(self._urls) - 1
        self._discovery: asyncio.Task[None] | None = None

    @property
    def peers(self) -> dict[str, str]:
        """Peer id -> URL, as last reported by the cluster."""
        return dict(self._peers)

    # -- peers and leader ------------------------------------------------------------------
    def apply_config(self, resp: RequestConfigResponse, url: str) -> None:
        """Adopt the peer list of a RequestConfig answer from ``url`` and its leader info."""
        if resp.peers:
            self._peers = {p.id: p.url for p in resp.peers}
            urls = [p.url for p in resp.peers]
            if urls != self._urls:
                self._urls = urls
                self._rr = min(self._rr, len(urls) - 1)
        if resp.is_leader:
            self.leader = Peer(resp.leader_id or url, url)
        else:
            self.leader_hint(resp.leader_id, url)

    def leader_hint(self, leader_id: str | None, responder: str) -> str | None:
        """Follow "the leader is ``leader_id``" from ``responder``; its URL, or None (and the
        leader forgotten) when no leader is named or its URL is unknown."""
        url = self._peers.get(leader_id) if leader_id is not None else None
        if url is None or url == responder:
            self.forget_leader()
            return None
        self.leader = Peer(leader_id or url, url)
        return url

    def known_leader(self) -> Peer | None:
        """The leader as currently known (a method, so callers re-read it after awaits)."""
        return self.leader

    def forget_leader(self, url: str | None = None) -> None:
        """Forget the leader (only if it is at ``url``, when given); discovery restarts after
        the forgotten peer."""
        leader = self.leader
        if leader is None or (url is not None and leader.url != url):
            return
        self.leader = None
        if leader.url in self._urls:
            self._rr = self._urls.index(leader.url)

    def next_url(self) -> str:
        """The next peer URL in rotation."""
        self._rr = (self._rr + 1) % len(self._urls)
        return self._urls[self._rr]

    # -- discovery -------------------------------------------------------------------------
    async def leader_url(self, deadline: float, started: float) -> str:
        """The leader's URL, running (or joining) a discovery if none is known."""
        while True:
            self.check_open()
            if self.leader is not None:
                return self.leader.url
            self.connect_all()
            task = self._discovery
            if task is None or task.done():
                task = self._discovery = asyncio.get_running_loop().create_task(
                    self._discover(deadline), name="raftlog-client-discovery"
                )
                task.add_done_callback(_retrieve)
            while not task.done():
                remaining = deadline - self.now()
                if remaining <= 0:
                    raise self.unavailable(started, "no leader found")
                if self.refusing():
                    await cancel_and_wait(task)  # nobody to discover: stop knocking
                    raise self.unavailable(started, "no leader found")
                await asyncio.wait({task}, timeout=min(REFUSAL_POLL, remaining))
            failed = not task.cancelled() and task.exception() is not None
            if failed and self.now() >= deadline:
                raise self.unavailable(started, "no leader found")

    async def _discover(self, deadline: float) -> None:
        while self.leader is None:
            remaining = deadline - self.now()
            if remaining <= 0:
                raise ClusterUnavailableError("no leader found")
            url = self.next_url()
            resp = await self.ask(url, RequestConfig(), min(self.response_timeout, remaining))
            if not isinstance(resp, RequestConfigResponse):
                continue
            self.apply_config(resp, url)
            if resp.is_leader:
                self.note(url, "leader")
            elif self.known_leader() is not None:  # follow the hint; if wrong, redirected later
                self.note(url, f"not leader (leader {resp.leader_id})")
            else:
                self.note(url, "not leader (no leader known)")
                await asyncio.sleep(max(0.0, min(self.election_grace, deadline - self.now())))

    # -- request/response primitives -------------------------------------------------------
    async def ask(self, url: str, msg: Request, timeout: float) -> Response | None:
        """One request to ``url`` with a fresh id; its first valid response, or None after
        ``timeout`` seconds (noted as the peer's outcome)."""
        req_id = self.new_id()
        frames = encode_request(msg, ident=self.ident, id=req_id)
        deadline = self.now() + timeout
        with self.waiters.register(req_id) as inbox:
            if not await self.send(url, frames, timeout):
                return None
            while True:
                delivery = await next_delivery(inbox, deadline - self.now())
                if delivery is None:
                    self.note(url, "no response")
                    return None
                if delivery is CLOSED:
                    raise ClientClosedError("the raftlog client is closed")
                raise_if_denied(delivery.frames)
                try:
                    return decode_response(frames[1], delivery.frames)[1]
                except RemoteProtocolError as exc:
                    self.note(delivery.url, f"malformed response ({exc})")

    async def leader_call(
        self,
        frames: list[bytes],
        interpret: Interpreter[T],
        *,
        deadline: float,
        started: float,
        final_from_any: bool = False,
    ) -> T:
        """Send ``frames`` to the leader until ``interpret`` gives a final answer.

        The same frames (hence the same id) are resent on every retry. Interim and "not
        leader" answers count only from the peer last asked; with ``final_from_any`` a final
        answer is taken from any peer (a late answer about the same reqid is still true).
        """
        req_id = frames[0]
        with self.waiters.register(req_id) as inbox:
            while True:
                url = await self.leader_url(deadline, started)
                remaining = deadline - self.now()
                if remaining <= 0:
                    raise self.unavailable(started, "no final answer")
                if not await self.send(url, frames, min(self.response_timeout, remaining)):
                    self.forget_leader(url)
                    continue
                outcome = await self._await_outcome(
                    inbox,
                    url,
                    interpret=interpret,
                    deadline=deadline,
                    started=started,
                    final_from_any=final_from_any,
                )
                if isinstance(outcome, Done):
                    return outcome.value

    async def _await_outcome(
        self,
        inbox: Inbox,
        url: str,
        *,
        interpret: Interpreter[T],
        deadline: float,
        started: float,
        final_from_any: bool,
    ) -> Done[T] | None:
        """Wait for the answer of ``url``; None means "resend" (timeout or redirect)."""
        while True:
            wait = min(self.response_timeout, deadline - self.now())
            delivery = await next_delivery(inbox, wait)
            if delivery is None:
                if self.now() >= deadline:
                    raise self.unavailable(started, "no final answer")
                self.note(url, "no response")
                self.forget_leader(url)
                return None
            if delivery is CLOSED:
                raise ClientClosedError("the raftlog client is closed")
            from_target = delivery.url == url
            if not (from_target or final_from_any):
                continue
            quota = quota_refusal_of(delivery.frames)
            if quota is not None:  # nothing was appended: wait as told, then resend
                wait = quota.retry_after_ms / 1000
                if self.now() + wait >= deadline:
                    raise QuotaExceededError(wait, quota.kind, quota.reason)
                self.note(url, f"over quota ({quota.kind}); retrying in {wait:.3f} s")
                await asyncio.sleep(wait)
                return None
            raise_if_denied(delivery.frames)
            try:
                outcome = interpret(delivery.frames, delivery.url)
            except RemoteProtocolError as exc:
                self.note(delivery.url, f"malformed response ({exc})")
                continue
            if isinstance(outcome, Done):
                return outcome
            if not from_target or isinstance(outcome, Wait):
                continue
            self.note(url, f"not leader (leader {outcome.leader_id or 'unknown'})")
            if self.leader_hint(outcome.leader_id, url) is None:
                await asyncio.sleep(max(0.0, min(self.election_grace, deadline - self.now())))
            return None

    # -- shutdown --------------------------------------------------------------------------
    async def aclose(self) -> None:
        """Wake every waiting call with ``ClientClosedError`` and close every socket."""
        if self.closed:
            return
        self.closed = True
        if self._discovery is not None:
            await cancel_and_wait(self._discovery)
        await self.close_sockets()


def _retrieve(task: asyncio.Task[None]) -> None:
    if not task.cancelled():
        task.exception()
