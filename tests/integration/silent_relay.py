"""A TCP relay on loopback that can go *silent*: it stops moving bytes either way and closes
nothing, so both ends' connections stay open and what they send waits in the kernel -- a
firewall or partition dropping packets, a host paused or hung, as ZeroMQ sees it (the
relay's kernel still answers TCP, so it stands for a silent application, not a dead host).

The fault proxy of ``tests/faults`` lets ZMTP commands through on purpose (its partitions
keep handshakes possible); heartbeats are what this relay exists to starve.
"""

from __future__ import annotations

import select
import socket
import threading


class SilentRelay:
    """Forwards each connection accepted on ``port`` to ``target``; while ``silent`` it moves
    no byte either way and closes nothing (connections still open and queue in the kernel)."""

    def __init__(self, port: int, target: int) -> None:
        self._listener = socket.create_server(("127.0.0.1", port))
        self._target = target
        self._pairs: dict[socket.socket, socket.socket] = {}
        self.silent = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            watched = [self._listener] + ([] if self.silent.is_set() else list(self._pairs))
            readable, _, _ = select.select(watched, [], [], 0.02)
            for sock in readable:
                if sock is self._listener:
                    self._accept()
                elif sock in self._pairs:
                    self._forward(sock)

    def _accept(self) -> None:
        client, _ = self._listener.accept()
        server = socket.create_connection(("127.0.0.1", self._target))
        self._pairs[client], self._pairs[server] = server, client

    def _forward(self, sock: socket.socket) -> None:
        other = self._pairs[sock]
        try:
            data = sock.recv(65536)
            if data:
                other.sendall(data)
                return
        except OSError:
            pass
        for end in (sock, other):  # one side closed: close the pair
            self._pairs.pop(end, None)
            end.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        for sock in [self._listener, *self._pairs]:
            sock.close()
