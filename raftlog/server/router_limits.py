"""The limits of a peer's ROUTER (issue #25) in one object the driver holds.

Why one object: the per-message limit, the per-connection backlog and connection caps
(``raftlog.server.backlog``) and the allocator settings (``raftlog.server.process_memory``)
are all derived from the same options and met at the same three places of the driver --
binding the ROUTER, taking each message from it (:meth:`RouterLimits.receive`, which also
asks a secure peer's request guard), and its timers -- so ``server/node.py`` only passes
them along. docs/operations.md §11 describes the limits and the bound they give.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from typing import Any, Final

import zmq

from raftlog import sockets
from raftlog.config import PeerSettings
from raftlog.metrics import PeerMetrics
from raftlog.options import RaftOptions
from raftlog.rpc.denied import AccessDenied, QuotaRefusal
from raftlog.security.peer import SecurePeer
from raftlog.security.quotas import QuotaBook
from raftlog.server.answer_backlog import DEFAULT_LIMIT, AnswerBacklog
from raftlog.server.backlog import FRAME_ALLOWANCE, ConnectionBacklog, connection_cap
from raftlog.server.entries_service import EntriesService
from raftlog.server.parked_reads import ParkedReads
from raftlog.server.process_memory import ProcessMemory, descriptor_limit
from raftlog.server.quota_gate import DROP, QuotaGate, gate_for, member_addresses
from raftlog.transport import MessageTooLargeError, RunQueue, RunShape, recv_bounded, take_run

RUN_LENGTH: Final = 64
"""Messages one :meth:`RouterLimits.take_run` takes at most, so the drain looks at the clock
between runs (as the general path does every 64 messages)."""

Deny = Callable[[bytes, bytes, AccessDenied | QuotaRefusal], None]
"""Sends an access-denied or quota answer: routing id, message id, the refusal."""


def heartbeat_commands_per_s() -> float:
    """ZMTP heartbeat commands a ROUTER connection may carry per second that the peer never
    takes (``ConnectionBacklog`` allows for them): a raftlog peer link's PINGs."""
    return 1000.0 / sockets.PEER_HEARTBEAT_IVL_MS


def subscriber_cap(descriptors: int) -> int:
    """The default cap of the PUB broadcast's connections: an eighth of ``descriptors`` (the
    ROUTER keeps about half, the HTTP and Kafka listeners their shares)."""
    return max(16, descriptors // 8)


class RouterLimits:
    """Everything that bounds what clients can make one peer hold."""

    def __init__(self, opts: RaftOptions, metrics: PeerMetrics, log: Any, *, owner: str) -> None:
        self.memory = ProcessMemory()  # memory comes back after a flood
        self.memory.configure()
        self.message_limit = sockets.message_budget(
            opts.max_log_entry_data_size, opts.peer_msg_data_size
        )
        """The ROUTER's per-frame ``MAXMSGSIZE`` and the per-message sum."""
        nofile = functools.cache(descriptor_limit)  # it raises the soft limit: once at most
        self.backlog = ConnectionBacklog(
            opts.max_connection_backlog or 2 * self.message_limit,
            opts.memory_high_water,
            metrics.connections_shed,
            owner=owner,
            max_connections=opts.max_client_connections or connection_cap(nofile()),
            per_address=opts.max_connections_per_address,
            commands_per_s=heartbeat_commands_per_s(),
        )
        self.answers = AnswerBacklog(opts.max_answer_backlog or DEFAULT_LIMIT, self.backlog)
        """What each connection leaves of its answers unread (``max_answer_backlog``)."""
        self.backlog.unread_answers = self.answers.unread  # above memory_high: shed either
        self.broadcast = ConnectionBacklog(
            sys.maxsize,  # a subscriber only subscribes: libzmq holds nothing of it
            0,
            metrics.connections_shed,
            owner=owner,
            max_connections=opts.max_subscriber_connections or subscriber_cap(nofile()),
            per_address=opts.max_connections_per_address,
            scope="broadcast_",
        )
        """The PUB broadcast's connection caps (its own monitor feeds it)."""
        self._too_large = metrics.messages_dropped.labels(reason="message_too_large")
        self._log = log
        self.quotas: QuotaGate | None = None
        """The quota check (``raftlog.server.quota_gate``); None while no quota is set,
        so an unlimited peer pays one ``is None`` test per message."""
        self._quota_book: QuotaBook | None = None
        self._refusals = metrics.quota_refusals
        self._install: Callable[[], QuotaGate | None] = lambda: None
        self._fd = -1
        """The connection of the message being received (quota checks only)."""

    def install_quotas(
        self, settings: PeerSettings, secure: SecurePeer | None, entries: EntriesService,
        parked: ParkedReads,
    ) -> None:
        """Put in force the quotas of the cluster file (``settings.quotas``, per source
        address; the members' addresses exempt) or of a CURVE peer's allowlist (``secure``'s
        policy): at start-up, and again after each allowlist reload (:meth:`reload_quotas`),
        the buckets carried over. The caps ask ``entries`` and ``parked`` which streams and
        waiting reads are still open."""
        plaintext = settings.quotas
        exempt = member_addresses(p.url for p in settings.peers)
        holder = None if secure is None else secure.holder
        if self._quota_book is None:
            self._quota_book = QuotaBook(self._refusals, per_address=holder is None)
        book = self._quota_book
        self._install = lambda: gate_for(plaintext, holder, book, stream_open=entries.is_open,
                                         read_waiting=parked.holds, log=self._log,
                                         connections=self.backlog, exempt=exempt)
        self.quotas = self._install()
        if secure is not None:
            secure.on_reload = self.reload_quotas

    def reload_quotas(self) -> None:
        """The allowlist was reloaded: its quotas (added, changed, removed) now apply."""
        self.quotas = self._install()

    def receive(
        self, router: zmq.Socket[bytes], secure: SecurePeer | None, deny: Deny
    ) -> list[bytes] | None:
        """The next ROUTER message to dispatch, or None when it was dropped (over the
        per-message limit), refused by ``secure``'s request guard or over a quota (answered
        with ``deny``); ``zmq.Again`` when there is none."""
        quotas = self.quotas
        try:
            frames, user = recv_bounded(
                router, self.message_limit, with_user=secure is not None,
                taken=self._took,
                with_address=secure is None and quotas is not None,
            )
        except MessageTooLargeError as exc:
            self.too_large(exc)
            return None
        if secure is not None:
            reason = secure.refusal(frames, user)
            if reason is not None:
                if len(frames) > 1:
                    deny(frames[0], frames[1], AccessDenied(reason))
                return None
        if quotas is not None:
            refusal = quotas.check(frames, user, self._fd)
            if refusal is not None:
                if refusal is not DROP:
                    deny(frames[0], frames[1], refusal)
                return None
        if not self.answers.admit(frames[0], self._fd):
            return None  # its client leaves too many answers unread: shed
        return frames

    def take_run(
        self, router: zmq.Socket[bytes], shape: RunShape, queue: RunQueue
    ) -> tuple[int, list[bytes] | None]:
        """For a peer without CURVE and quotas (nothing to check per sender): up to
        ``RUN_LENGTH`` messages, each one of ``shape`` queued, with the same per-message
        limit and backlog accounting as :meth:`receive`. Returns ``(taken, frames)``:
        ``frames`` the message that ended the run, for the general path (None when nothing
        more was queued, the run was full, or it was over the limit and dropped); ``taken``
        0 means the socket was empty."""
        taken, odd = take_run(
            router, self.message_limit, shape, queue, self.backlog.tally,
            allowance=FRAME_ALLOWANCE, max_count=RUN_LENGTH,
        )
        if odd is None:
            return taken, None
        frames, size, too_large, fd = odd
        if too_large:
            self.too_large(MessageTooLargeError(frames, size, None))
            return taken, None
        if not self.answers.admit(frames[0], fd):
            return taken, None  # its client leaves too many answers unread: shed
        return taken, frames

    def _took(self, fd: int, size: int, frames: int) -> None:
        """``backlog.taken``, remembering the connection for the quota and answer checks."""
        self._fd = fd
        self.backlog.taken(fd, size, frames)

    def too_large(self, exc: MessageTooLargeError) -> None:
        """Count a message over the per-message limit (already discarded); log the 1st,
        2nd, 4th, 8th... so a flood of them costs a few log lines, not one each."""
        count = self._too_large.inc()
        if count & (count - 1) == 0:
            self._log.warning("message_too_large", size=exc.size, limit=self.message_limit,
                              client_key=exc.user, count=count)


__all__ = ["RouterLimits"]
