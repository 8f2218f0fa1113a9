"""A REST request that fails frees what its handler held at once, by reference counting:
no reference cycle keeps its frames -- and so its parsed body, its decoded messages, the
chunks it read -- until Python's cyclic collector happens to run. Under a flood of failing
4 MiB publishes that collector runs rarely (it counts container allocations, not bytes),
and such cycles held hundreds of MiB (tests/faults/test_rest_trickled_bodies.py)."""

from __future__ import annotations

import asyncio
import gc
import socket
import weakref
from collections.abc import Callable, Coroutine
from typing import Any

from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from raftlog.rest.answer_memory import AnswerMemory
from raftlog.rest.app import ends_on_shutdown, errors_as_json
from raftlog.rest.body_memory import BodyMemory
from raftlog.web.errors import RestError


class Held:
    """Stands for what a handler holds while it works (a parsed body)."""


def rest_chain() -> web.Application:
    """An app with the REST app's middleware chain (``raftlog.rest.app``)."""
    return web.Application(middlewares=[
        errors_as_json, ends_on_shutdown(asyncio.Event()), AnswerMemory(1 << 30).middleware(),
        BodyMemory(1 << 20).middleware()])


def without_collector(body: Callable[[], Coroutine[Any, Any, None]]) -> None:
    """Run ``body`` with Python's cyclic collector off: what it frees, reference counting
    freed."""
    gc.collect()
    gc.disable()
    try:
        asyncio.run(body())
    finally:
        gc.enable()


def test_a_failed_requests_locals_are_freed_without_the_cyclic_collector() -> None:
    kept: list[weakref.ref[Held]] = []

    async def failing(_request: web.Request) -> web.Response:
        held = Held()
        kept.append(weakref.ref(held))
        raise RestError(400, "BadRequest", "refused after the body was parsed")

    async def body() -> None:
        app = rest_chain()
        app.router.add_post("/fail", failing)
        async with TestClient(TestServer(app)) as client:
            answer = await client.post("/fail", data=b"{}")
            assert answer.status == 400
            await answer.read()
        assert len(kept) == 1 and kept[0]() is None, "a reference cycle keeps the handler"

    without_collector(body)


class Answer(bytearray):
    """A large answer that a weak reference can watch."""


def test_an_answer_whose_client_hung_up_is_freed_without_the_cyclic_collector() -> None:
    """The write to a client that hung up fails with an error asyncio keeps on its drain
    waiter, whose traceback holds the waiter's frame: the answer stayed in that cycle until
    the cyclic collector ran (``raftlog.web.hangups``)."""
    kept: list[weakref.ref[Answer]] = []

    async def big(_request: web.Request) -> web.Response:
        answer = Answer(b"z" * (8 << 20))
        kept.append(weakref.ref(answer))
        return web.Response(body=answer)

    def hang_up(port: int) -> None:
        with socket.create_connection(("127.0.0.1", port)) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            sock.sendall(b"GET /big HTTP/1.1\r\nHost: x\r\n\r\n")
            assert sock.recv(64).startswith(b"HTTP/1.1 200")

    async def body() -> None:
        app = rest_chain()
        app.router.add_get("/big", big)
        async with TestServer(app) as server:
            await asyncio.get_running_loop().run_in_executor(None, hang_up, server.port)
            for _ in range(100):  # the listener notices the hang-up on its next write
                if kept and kept[0]() is None:
                    break
                await asyncio.sleep(0.05)
        assert len(kept) == 1 and kept[0]() is None, "a reference cycle keeps the answer"

    without_collector(body)
