"""The ZeroMQ side of the quotas (issue #25): each ROUTER message checked against its
principal's quota before it is dispatched, so nothing over quota reaches the consensus core.

Who the principal is: on a CURVE peer the client the message's key belongs to (libzmq's
``User-Id``; members are never limited), on a plaintext peer the source address (libzmq's
``Peer-Address`` message property, which every TCP connection carries; a transport without
one -- ipc, inproc -- has the address ``"-"``, one principal for all such clients). The
quotas themselves and their arithmetic live in ``raftlog.security.quotas``.

What is metered: publishes (``=`` RequestUpdate and the ``TP`` topic publish) in records and
bytes, RequestEntries streams and waiting ``TR`` reads (with a ``wait``) by count. Every
other message type passes after one set lookup -- unless some principal has a cap on
connections: then each message's principal is looked up, and a connection past the cap is
shed at its first request (the ROUTER's connection tracker, ``raftlog.server.backlog``). On
a plaintext peer the members' own addresses are never limited (:func:`member_addresses`).
A refusal is answered with the typed
``QuotaRefusal`` (``raftlog.rpc.denied``) where the client can understand it: always on a
CURVE peer, and for ``TP`` and ``TR`` (raftlog extensions) on a plaintext one. A reference
client's ``=`` or RequestEntries over quota on a plaintext cluster is dropped: every answer
it knows would mean "not leader" or "done", and silence makes its transport retry after its
response timeout, which is the back-off we want (docs/protocol.md §5.3.1).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable, Iterable
from typing import Any, Final

from raftlog.rpc.denied import QuotaRefusal
from raftlog.rpc.messages import TYPE_REQUEST_ENTRIES, TYPE_REQUEST_UPDATE
from raftlog.security.policy import PolicyHolder
from raftlog.security.quotas import Quota, QuotaBook
from raftlog.server.backlog import ConnectionBacklog
from raftlog.topics.records import HEADER_SIZE, KIND_RECORDS, MAGIC, RecordBatch, TopicError
from raftlog.topics.records_kv import KIND_CONDITIONAL
from raftlog.topics.records_tx import KIND_TX_STORE, TxStore, decode_any_entry
from raftlog.topics.wire import TYPE_PUBLISH, TYPE_READ, decode_read_request
from raftlog.topics.wire_fetch import TYPE_FETCH, decode_fetch_request

METERED: Final = frozenset(
    {TYPE_REQUEST_UPDATE, TYPE_PUBLISH, TYPE_REQUEST_ENTRIES, TYPE_READ, TYPE_FETCH}
)
EXTENSIONS: Final = frozenset({TYPE_PUBLISH, TYPE_READ, TYPE_FETCH})
"""Request types only raftlog clients send: a typed refusal is understood on any cluster."""
DROP: Final = QuotaRefusal(0, "drop", "")
"""Over quota, and the client would not understand the answer: send nothing."""
LOG_SAMPLE: Final = 100
TYPE_FRAME: Final = 2
ARGS_FRAME: Final = 4


def record_count(data: bytes) -> int:
    """How many records a publish carries: a topic batch's array length (read from its
    msgpack header, no decoding), a transactional store's records, else 1 (a plain update,
    a topic command, a transaction control). Malformed data counts 1: its handler refuses it."""
    if len(data) <= HEADER_SIZE or data[:4] != MAGIC:
        return 1
    kind = data[5]
    if kind == KIND_RECORDS:
        head = data[HEADER_SIZE]
        if 0x90 <= head <= 0x9F:
            return head & 0x0F
        if head == 0xDC:
            return int.from_bytes(data[HEADER_SIZE + 1:HEADER_SIZE + 3], "big")
        if head == 0xDD:
            return int.from_bytes(data[HEADER_SIZE + 1:HEADER_SIZE + 5], "big")
        return 1
    if kind in (KIND_TX_STORE, KIND_CONDITIONAL):  # a conditional batch: issue #29
        try:
            entry = decode_any_entry(data)
        except TopicError:
            return 1
        return len(entry.records) if isinstance(entry, TxStore | RecordBatch) else 1
    return 1


class QuotaGate:
    """Checks ROUTER messages against the quotas (module docstring)."""

    def __init__(
        self,
        book: QuotaBook,
        *,
        holder: PolicyHolder | None,
        plaintext: Quota | None,
        stream_open: Callable[[Hashable], bool],
        read_waiting: Callable[[Hashable], bool],
        log: Any,
        clock: Callable[[], float] = time.monotonic,
        connections: ConnectionBacklog | None = None,
        exempt: frozenset[str] = frozenset(),
    ) -> None:
        self.book = book
        self._exempt = exempt
        """Plaintext: the members' addresses (their REST gateways forward writes)."""
        self._holder = holder
        self._plaintext = plaintext
        self._connections = connections
        self._capped = connections is not None and (
            any(p.quota is not None and p.quota.connections is not None
                for p in holder.current.principals.values())
            if holder is not None else plaintext is not None and plaintext.connections is not None
        )
        """Some principal has a connections cap: every message is then checked, not only
        the metered types."""
        self._stream_open = stream_open
        self._read_waiting = read_waiting
        self._log = log
        self._clock = clock
        self._refused = 0

    def check(self, frames: list[bytes], user: str | None, fd: int = -1) -> QuotaRefusal | None:
        """None to let ``frames`` through; else the refusal to send (``DROP``: none).
        ``user`` is the CURVE key (secure peer) or the source address (plaintext), ``fd``
        the connection's descriptor (libzmq's ``SRCFD``; -1: unknown)."""
        if len(frames) <= TYPE_FRAME:
            return None
        msg_type = frames[TYPE_FRAME]
        metered = msg_type in METERED and len(frames) > ARGS_FRAME
        if not metered and not self._capped:
            return None
        if self._holder is not None:
            principal = self._holder.current.principal(user.encode()) if user else None
            if principal is None or principal.quota is None:
                return None  # a member (or unknown: the guard already refused it)
            who, quota = principal.name, principal.quota
        else:
            plaintext = self._plaintext
            if plaintext is None or user in self._exempt:
                return None
            who, quota = user or "-", plaintext
        refusal = None
        if self._capped and quota.connections is not None and fd >= 0:
            refusal = self._connection(who, quota.connections, fd)
        if refusal is None and metered:
            refusal = self._check(who, quota, msg_type, frames)
        if refusal is None:
            return None
        self._refused += 1
        if self._refused % LOG_SAMPLE == 1:
            self._log.info("quota_refused", principal=who, kind=refusal.kind,
                           retry_after_ms=refusal.retry_after_ms, count=self._refused)
        if self._holder is None and msg_type not in EXTENSIONS:
            return DROP
        return refusal

    def _connection(self, who: str, cap: int, fd: int) -> QuotaRefusal | None:
        """Admit the connection on ``fd`` as one of ``who``'s, or shed it (over the cap).
        A connection is (descriptor, socket inode): a reused descriptor number is another
        connection, and the ones the backlog no longer tracks have ended."""
        backlog = self._connections
        assert backlog is not None
        inode = backlog.track(fd)
        if inode is None:
            return None  # not a TCP connection, or gone
        if self.book.admit(who, "connections", (fd, inode), cap, self._alive):
            return None
        backlog.shed(fd, "quota_connections")
        return QuotaRefusal(1000, "connections", f"{who} already has {cap} connections")

    def _alive(self, key: tuple[int, int]) -> bool:
        """Is the connection (descriptor, inode) still the one the backlog tracks?"""
        backlog = self._connections
        return backlog is not None and backlog.identity(key[0]) == key[1]

    def _check(self, who: str, quota: Quota, msg_type: bytes,
               frames: list[bytes]) -> QuotaRefusal | None:
        if msg_type in (TYPE_REQUEST_UPDATE, TYPE_PUBLISH):
            if not quota.limits_publish:
                return None
            data = frames[ARGS_FRAME]
            wait = self.book.publish_wait(who, quota, record_count(data), len(data), self._clock())
            if not wait:
                return None
            return QuotaRefusal(
                max(1, round(wait * 1000)), "publish_rate",
                f"{who} is over its publish quota ({_rates(quota)})",
            )
        key = (frames[0], frames[1])
        if msg_type == TYPE_REQUEST_ENTRIES:
            cap = quota.streams
            if cap is None or self.book.admit(who, "streams", key, cap, self._stream_open):
                return None
            return QuotaRefusal(1000, "streams", f"{who} already has {cap} RequestEntries "
                                "streams open")
        cap = quota.waiting_reads  # TYPE_READ, TYPE_FETCH (#27): a waiting one holds a place
        if cap is None or b"wait" not in frames[ARGS_FRAME] or not _waits(frames):
            return None
        if self.book.admit(who, "waiting_reads", key, cap, self._read_waiting):
            return None
        return QuotaRefusal(1000, "waiting_reads", f"{who} already has {cap} waiting reads")


def _waits(frames: list[bytes]) -> bool:
    try:
        if frames[TYPE_FRAME] == TYPE_FETCH:
            return bool(decode_fetch_request(frames[ARGS_FRAME:]).read.wait_ms)
        return bool(decode_read_request(frames[ARGS_FRAME:]).wait_ms)
    except TopicError:
        return False  # its handler answers the error


def _rates(quota: Quota) -> str:
    rates = [f"{rate:g} {unit}/s" for rate, unit in ((quota.records_per_s, "records"),
                                                      (quota.bytes_per_s, "bytes")) if rate]
    return ", ".join(rates)


def gate_for(
    plaintext: Quota | None,
    holder: PolicyHolder | None,
    book: QuotaBook,
    *,
    stream_open: Callable[[Hashable], bool],
    read_waiting: Callable[[Hashable], bool],
    log: Any,
    connections: ConnectionBacklog | None = None,
    exempt: frozenset[str] = frozenset(),
) -> QuotaGate | None:
    """The gate a peer needs now, or None when no quota is set (start-up, and again after
    each allowlist reload: ``book`` carries the buckets over). ``holder`` is a CURVE peer's
    policy; ``plaintext`` the cluster file's per-address quota; ``connections`` the ROUTER's
    connection tracker (the connections quota sheds through it); ``exempt`` the source
    addresses a plaintext peer never limits (the members': see :func:`member_addresses`)."""
    if holder is not None:
        if not any(p.quota is not None for p in holder.current.principals.values()):
            return None
    elif plaintext is None:
        return None
    return QuotaGate(book, holder=holder, plaintext=plaintext, stream_open=stream_open,
                     read_waiting=read_waiting, log=log, connections=connections,
                     exempt=exempt)


def member_addresses(urls: Iterable[str]) -> frozenset[str]:
    """The IP literals of the members' ``tcp://IP:PORT`` URLs: on a plaintext cluster a
    member's address is never limited, because its REST gateway forwards its HTTP clients'
    writes to the leader (each already charged by that peer's REST quotas) and its peer RPCs
    come from it. So clients running on a member's host are not limited on ZeroMQ."""
    out = set()
    for url in urls:
        host = url.removeprefix("tcp://").rsplit(":", 1)[0].strip("[]")
        if host:
            out.add(host)
    return frozenset(out)
