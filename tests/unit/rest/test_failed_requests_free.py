"""A REST request that fails frees what its handler held at once, by reference counting:
no reference cycle keeps its frames -- and so its parsed body, its decoded messages, the
chunks it read -- until Python's cyclic collector happens to run. Under a flood of failing
4 MiB publishes that collector runs rarely (it counts container allocations, not bytes),
and such cycles held hundreds of MiB (tests/faults/test_rest_trickled_bodies.py)."""

from __future__ import annotations

import asyncio
import gc
import weakref

from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from raftlog.rest.answer_memory import AnswerMemory
from raftlog.rest.app import ends_on_shutdown, errors_as_json
from raftlog.rest.body_memory import BodyMemory
from raftlog.web.errors import RestError


class Held:
    """Stands for what a handler holds while it works (a parsed body)."""


def test_a_failed_requests_locals_are_freed_without_the_cyclic_collector() -> None:
    kept: list[weakref.ref[Held]] = []

    async def failing(_request: web.Request) -> web.Response:
        held = Held()
        kept.append(weakref.ref(held))
        raise RestError(400, "BadRequest", "refused after the body was parsed")

    async def body() -> None:
        closing = asyncio.Event()
        app = web.Application(middlewares=[  # the REST app's chain (raftlog.rest.app)
            errors_as_json, ends_on_shutdown(closing), AnswerMemory(1 << 20).middleware(),
            BodyMemory(1 << 20).middleware()])
        app.router.add_post("/fail", failing)
        async with TestClient(TestServer(app)) as client:
            answer = await client.post("/fail", data=b"{}")
            assert answer.status == 400
            await answer.read()
        assert len(kept) == 1 and kept[0]() is None, "a reference cycle keeps the handler"

    gc.collect()
    gc.disable()
    try:
        asyncio.run(body())
    finally:
        gc.enable()
