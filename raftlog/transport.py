"""Fast multipart send/receive on blocking pyzmq sockets (peer and load-generator hot paths).

``Socket.send_multipart`` builds a Frame per part (``copy=False``) or goes through the
IntFlag arithmetic of ``zmq.SNDMORE | flags`` for every part; measured here on small
messages it manages ~110-160k messages/s, while calling the Cython backend's ``send`` with
precomputed integer flags manages ~700k/s. Same bytes on the wire; only the Python overhead
differs. The functions take the high-level ``zmq.Socket`` (a subclass of the backend class).

Each function here has a pure-Python twin (``*_py``, the definition) and, when
``raftlog._speedups_transport`` was built, a compiled one that moves frames straight between
libzmq and bytes objects (~1 us per frame less on receive); ``raftlog.speedups`` chooses.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Final, NamedTuple

import zmq
from zmq.backend import Socket as _BackendSocket

from raftlog import speedups

_send: Any = _BackendSocket.send
_recv: Any = _BackendSocket.recv

NOBLOCK: Final = int(zmq.NOBLOCK)
_SRCFD: Final = int(zmq.SRCFD)
_MORE_NOBLOCK: Final = int(zmq.SNDMORE) | NOBLOCK


def send_frames_py(socket: zmq.Socket[bytes], frames: Sequence[bytes]) -> None:
    """Send ``frames`` as one multipart message without blocking; raises ``zmq.Again``
    (before anything is queued) when the socket's high-water mark is reached."""
    last = len(frames) - 1
    _send(socket, frames[0], _MORE_NOBLOCK if last else NOBLOCK)
    for n in range(1, last + 1):
        _send(socket, frames[n], _MORE_NOBLOCK if n < last else NOBLOCK)


def send_routed_py(
    socket: zmq.Socket[bytes], routing: bytes, msg_id: bytes, body: Sequence[bytes]
) -> None:
    """A reply on a ROUTER: ``routing`` (the client's identity), the echoed ``msg_id``, then
    ``body`` (encoded by ``raftlog.rpc``); raises ``zmq.Again`` like ``send_frames``."""
    _send(socket, routing, _MORE_NOBLOCK)
    last = len(body) - 1
    _send(socket, msg_id, _MORE_NOBLOCK if last >= 0 else NOBLOCK)
    for n in range(last + 1):
        _send(socket, body[n], _MORE_NOBLOCK if n < last else NOBLOCK)


def send_update_dones_py(
    socket: zmq.Socket[bytes],
    first: int,
    waiters: Sequence[tuple[bytes, bytes, bool]],
    encode: Callable[[int], Sequence[bytes]],
) -> int:
    """The final answer to the ``k``-th waiter's RequestUpdate -- ``routing``, its request
    id, then ``encode(first + k)`` (``raftlog.rpc.responses.encode_update_done``) -- for
    each ``(routing, request id, _)`` in ``waiters``; returns how many the ROUTER dropped
    (``zmq.Again``: that client's queue is full). Why one call for all: a leader answers a
    whole run of committed updates at once, and per answer the Python loop, the encoder and
    the send wrapper cost more than the send (issue #28). The compiled twin writes the body
    of an index up to 2**31 - 1 itself and calls ``encode`` only beyond."""
    if first < 0:
        raise ValueError(f"first index {first} is negative")
    dropped = 0
    for offset, waiter in enumerate(waiters):
        try:
            send_routed_py(socket, waiter[0], waiter[1], encode(first + offset))
        except zmq.Again:
            dropped += 1
    return dropped


def recv_frames_py(socket: zmq.Socket[bytes]) -> list[bytes]:
    """Receive one whole multipart message without blocking (``zmq.Again`` if none).

    Frames are taken with ``copy=False`` and their ``more`` flag: asking the socket for
    ``RCVMORE`` after every part goes through an IntEnum conversion and measured 2.4x slower
    (78k vs 190k five-part messages/s)."""
    frame = _recv(socket, NOBLOCK, copy=False)
    parts: list[bytes] = [frame.bytes]
    while frame.more:
        frame = _recv(socket, NOBLOCK, copy=False)
        parts.append(frame.bytes)
    return parts


class MessageTooLargeError(Exception):
    """A ROUTER message whose frames add up to more than the peer's per-message limit: its
    remaining frames were received and discarded one by one, never joined or copied."""

    def __init__(self, head: list[bytes], size: int, user: str | None) -> None:
        super().__init__(f"message of at least {size} bytes exceeds the per-message limit")
        self.head = head
        """The frames kept before the limit was passed (routing id, message id, ...)."""
        self.size = size
        self.user = user


def recv_bounded_py(
    socket: zmq.Socket[bytes],
    limit: int,
    *,
    with_user: bool,
    taken: Callable[[int, int, int], None] | None = None,
    with_address: bool = False,
) -> tuple[list[bytes], str | None]:
    """:func:`recv_frames_py` for the peer's ROUTER, plus the ``User-Id`` ZAP attached to the
    connection when ``with_user`` (the z85 CURVE key of the sender on a secure socket; None
    on a plaintext one), and a cap on the whole message: libzmq's ``MAXMSGSIZE`` bounds
    each frame, not their sum (issue #25). Once the frames received so far add up to more
    than ``limit`` bytes, the rest are taken from libzmq and dropped at once (their memory
    returns as each is read), and ``MessageTooLargeError`` is raised; Python never holds
    more than ``limit`` plus one frame of a message. ``taken(fd, bytes, frames)`` is told
    which connection (libzmq's ``SRCFD``) each message came from, and how big it was
    (``raftlog.server.backlog``). ``with_address`` (plaintext peers with quotas) returns the
    sender's ``Peer-Address`` (its IP, no port) in place of the User-Id: the principal of a
    plaintext client (``raftlog.server.quota_gate``)."""
    frame = first = _recv(socket, NOBLOCK, copy=False)
    user: str | None = None
    if with_user or with_address:
        try:
            user = frame.get("User-Id" if with_user else "Peer-Address")
        except zmq.ZMQError:  # no ZAP on this connection / not a TCP connection
            user = None
    parts: list[bytes] = [frame.bytes]
    total = 0  # the routing id is the peer's own, not the sender's bytes
    while frame.more:
        frame = _recv(socket, NOBLOCK, copy=False)
        data = frame.bytes
        total += len(data)
        if total > limit:
            count = len(parts) + 1
            while frame.more:
                frame = _recv(socket, NOBLOCK, copy=False)
                total += len(frame)
                count += 1
            if taken is not None:
                taken(_source_fd(first), total, count)
            raise MessageTooLargeError(parts[:2], total, user)
        parts.append(data)
    if taken is not None:
        try:  # inline _source_fd: once per message on the publish path (issue #28)
            fd: int = first.get(_SRCFD)
        except zmq.ZMQError:
            fd = -1
        taken(fd, total, len(parts))
    return parts, user


class RunShape(NamedTuple):
    """The one message shape :func:`take_run` queues without Python looking at each message:
    ``[routing, id, msg_type, ident, data]`` with an id of ``id_size`` bytes and 1 to
    ``max_data`` bytes of data. The client service says which messages have it
    (``raftlog.server.client_service.ClientService.update_run``)."""

    msg_type: bytes
    ident: bytes
    id_size: int
    max_data: int


RunQueue = list[tuple[bytes, bytes, bytes]]
"""What :func:`take_run` fills: ``(routing, id, data)`` per message of the shape."""
OddMessage = tuple[list[bytes], int, bool, int]
"""The message that ended a run: its frames (only the routing id and message id when it was
over the limit), its size after the routing id, whether it was over the limit, and the
descriptor of its connection (-1: unknown; the answer backlog,
``raftlog.server.answer_backlog``)."""


def take_run_py(
    socket: zmq.Socket[bytes],
    limit: int,
    shape: RunShape,
    queue: RunQueue,
    tally: dict[int, int],
    *,
    allowance: int,
    max_count: int,
) -> tuple[int, OddMessage | None]:
    """Take up to ``max_count`` messages from the peer's ROUTER, each capped at ``limit`` like
    :func:`recv_bounded_py`, and queue each one of ``shape`` as ``(routing, id, data)``; the
    first message of another shape (or over the limit) ends the run and is returned for the
    general path. Every message taken adds its size plus ``allowance`` per frame to
    ``tally[fd]`` (the backlog accounting, ``raftlog.server.backlog``). Returns ``(taken,
    other)``; ``other`` is None when nothing more was queued or ``max_count`` were taken.

    Why: at 128 updates in flight a RequestUpdate is most of what a leader receives, and
    taking each through the general receive, header check, decoder and handler cost ~10
    Python calls per update (issue #28); the compiled twin takes a run of them in one call."""
    msg_type, ident, id_size, max_data = shape
    size = last_fd = 0

    def account(fd: int, total: int, frames: int) -> None:
        nonlocal size, last_fd
        tally[fd] = tally.get(fd, 0) + total + allowance * frames
        size, last_fd = total, fd

    taken = 0
    while taken < max_count:
        try:
            parts, _ = recv_bounded_py(socket, limit, with_user=False, taken=account)
        except zmq.Again:
            break
        except MessageTooLargeError as exc:
            return taken + 1, (exc.head, exc.size, True, last_fd)
        taken += 1
        if (
            len(parts) != 5
            or len(parts[1]) != id_size
            or parts[2] != msg_type
            or parts[3] != ident
            or not 0 < len(parts[4]) <= max_data
        ):
            return taken, (parts, size, False, last_fd)
        queue.append((parts[0], parts[1], parts[4]))
    return taken, None


def _source_fd(frame: Any) -> int:
    """The descriptor of the connection ``frame`` came from (-1: none, e.g. inproc)."""
    try:
        fd: int = frame.get(_SRCFD)
    except zmq.ZMQError:
        return -1
    return fd


if speedups.transport is None:
    send_frames = send_frames_py
    send_routed = send_routed_py
    recv_frames = recv_frames_py
    recv_bounded = recv_bounded_py
    take_run = take_run_py
    send_update_dones = send_update_dones_py
else:
    _c = speedups.transport
    _c_send_frames, _c_send_routed = _c.send_frames, _c.send_routed
    _c_recv_frames, _c_recv_bounded = _c.recv_frames, _c.recv_bounded
    _c_take_run = _c.take_run
    _c_send_update_dones = _c.send_update_dones

    def send_frames(socket: zmq.Socket[bytes], frames: Sequence[bytes]) -> None:
        """``send_frames_py``, compiled."""
        _c_send_frames(socket.underlying, frames)

    def send_routed(
        socket: zmq.Socket[bytes], routing: bytes, msg_id: bytes, body: Sequence[bytes]
    ) -> None:
        """``send_routed_py``, compiled."""
        _c_send_routed(socket.underlying, routing, msg_id, body)

    def send_update_dones(
        socket: zmq.Socket[bytes],
        first: int,
        waiters: Sequence[tuple[bytes, bytes, bool]],
        encode: Callable[[int], Sequence[bytes]],
    ) -> int:
        """``send_update_dones_py``, compiled: the same frames and the same count."""
        return _c_send_update_dones(socket.underlying, first, waiters, encode)

    def recv_frames(socket: zmq.Socket[bytes]) -> list[bytes]:
        """``recv_frames_py``, compiled."""
        return _c_recv_frames(socket.underlying)

    def recv_bounded(
        socket: zmq.Socket[bytes],
        limit: int,
        *,
        with_user: bool,
        taken: Callable[[int, int, int], None] | None = None,
        with_address: bool = False,
    ) -> tuple[list[bytes], str | None]:
        """``recv_bounded_py``, compiled: the same frames, limit, metadata and ``taken``."""
        prop = "User-Id" if with_user else "Peer-Address" if with_address else None
        parts, user, fd, total, count, too_large = _c_recv_bounded(
            socket.underlying, limit, prop
        )
        if taken is not None:
            taken(fd, total, count)
        if too_large:
            raise MessageTooLargeError(parts[:2], total, user)
        return parts, user

    def take_run(
        socket: zmq.Socket[bytes],
        limit: int,
        shape: RunShape,
        queue: RunQueue,
        tally: dict[int, int],
        *,
        allowance: int,
        max_count: int,
    ) -> tuple[int, OddMessage | None]:
        """``take_run_py``, compiled: the same queue, tally and odd message."""
        return _c_take_run(socket.underlying, limit, shape, queue, tally, allowance, max_count)
