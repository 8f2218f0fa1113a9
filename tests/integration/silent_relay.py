"""A TCP relay on loopback that can go *silent*: it stops moving bytes either way and closes
nothing, so both ends' connections stay open and what they send waits in the kernel -- a
firewall or partition dropping packets, a host powered off or hung, as the two ends see it.

The fault proxy of ``tests/faults`` lets ZMTP commands through on purpose (its partitions
keep handshakes possible); heartbeats are what this relay exists to starve.
"""

from __future__ import annotations

import select
import socket
import threading
from typing import Final

TCP_ESTABLISHED: Final = 1
"""``tcpi_state`` of an open connection (Linux); the remote's FIN makes it CLOSE_WAIT, a
reset CLOSE."""


def tcp_state(sock: socket.socket) -> int:
    """The kernel's state of TCP socket ``sock`` (0: closed here, or unknown)."""
    try:
        return sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 8)[0]
    except OSError:
        return 0


class SilentRelay:
    """Forwards each connection accepted on ``port`` to ``target`` (on 127.0.0.1, the
    upstream connection made from ``source``, so the target sees that address); while
    ``silent`` it moves no byte either way and closes nothing."""

    def __init__(self, port: int, target: int, *, source: str = "127.0.0.1") -> None:
        self._listener = socket.create_server(("127.0.0.1", port))
        self._target = target
        self._source = source
        self._pairs: dict[socket.socket, socket.socket] = {}
        self._upstream: list[socket.socket] = []
        self._downstream: list[socket.socket] = []
        self.to_clients = 0
        """Bytes forwarded from the target to the clients so far."""
        self._lock = threading.Lock()
        self.silent = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            with self._lock:
                pairs = list(self._pairs)
            watched = [self._listener] + ([] if self.silent.is_set() else pairs)
            readable, _, _ = select.select(watched, [], [], 0.02)
            for sock in readable:
                if sock is self._listener:
                    self._accept()
                elif sock in self._pairs:
                    self._forward(sock)

    def _accept(self) -> None:
        client, _ = self._listener.accept()
        server = socket.create_connection(("127.0.0.1", self._target),
                                          source_address=(self._source, 0))
        with self._lock:
            self._pairs[client], self._pairs[server] = server, client
            self._upstream.append(server)
            self._downstream.append(client)

    def _forward(self, sock: socket.socket) -> None:
        other = self._pairs[sock]
        try:
            data = sock.recv(65536)
            if data:
                if sock in self._upstream:  # counted first: a client that has the bytes
                    self.to_clients += len(data)  # finds them counted
                other.sendall(data)
                return
        except OSError:
            pass
        with self._lock:
            for end in (sock, other):  # one side closed: close the pair
                self._pairs.pop(end, None)
                end.close()

    def upstream_closed(self) -> int:
        """How many upstream connections the target has closed, seen from their TCP state
        without reading them (what the target sent before closing stays unread)."""
        with self._lock:
            upstream = list(self._upstream)
        return sum(1 for sock in upstream if tcp_state(sock) != TCP_ESTABLISHED)

    def clients_closed(self) -> int:
        """How many client connections their client has closed (as :meth:`upstream_closed`)."""
        with self._lock:
            downstream = list(self._downstream)
        return sum(1 for sock in downstream if tcp_state(sock) != TCP_ESTABLISHED)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        with self._lock:
            for sock in [self._listener, *self._pairs]:
                sock.close()
