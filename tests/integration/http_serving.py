"""An aiohttp application served by the real ``HttpListener`` (its connection guard
included) on an ephemeral loopback port: what the guard and answer-memory tests run on."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from contextlib import contextmanager

from aiohttp import web

from raftlog.observability.http import HttpListener
from raftlog.observability.http_settings import HttpSettings


@contextmanager
def serving(app: web.Application, limits: HttpSettings) -> Iterator[tuple[HttpListener, int]]:
    """``app`` served under ``limits``; (the listener, its port) until the block ends."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    running = HttpListener(app, "127.0.0.1", port, limits=limits)
    running.start()
    try:
        yield running, port
    finally:
        running.stop()
