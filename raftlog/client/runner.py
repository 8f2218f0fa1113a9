"""``LoopThread``: one asyncio event loop on a daemon thread, for blocking code to call into.

Why one: the blocking clients (``SyncRaftClient`` and the sync topic faces), the Spark
source's ``LogClient`` and the peer's HTTP listener (where the REST gateway lives) each ran
their own hand-made loop thread -- three copies of the start, the thread-safe submit, the
refusal to deadlock on the loop's own thread, the cancellation of an interrupted call and
the shutdown. They differ only in what runs first (the listener binds its port) and last
(its runner's cleanup), which ``setup`` and ``teardown`` say.

ZeroMQ sockets and client objects created on the loop are only ever touched from it: the
callers hand coroutines over (``run``, ``submit``) and async iterators are pulled from it in
batches (``iterate``), so one item does not cost one thread handoff.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Generator
from typing import Any, Final, TypeVar

from raftlog.errors import ClientClosedError

T = TypeVar("T")

START_TIMEOUT: Final = 10.0
"""Seconds ``start`` waits for ``setup`` (e.g. binding a port) before giving up."""


ITEMS_PER_HANDOFF: Final = 1024
"""Stream items taken per round trip to the loop thread. One item per round trip cost
~50 µs of thread handoff each (py-spy: a joining peer's RequestEntries catch-up ran at
~20k entries/s, most of it in ``Condition.wait`` and the selector); a batch of entries
arrives in one message anyway."""


class LoopStartError(TimeoutError):
    """The loop thread did not finish ``setup`` in time (it may still be running it)."""


async def next_items(
    stream: AsyncIterator[T], limit: int
) -> tuple[list[T], bool, BaseException | None]:
    """Up to ``limit`` items; then whether the stream ended, and the error that ended it
    (raised by the caller once the items before it are handed out)."""
    items: list[T] = []
    try:
        while len(items) < limit:
            items.append(await stream.__anext__())
    except StopAsyncIteration:
        return items, True, None
    except Exception as exc:
        if not items:
            raise
        return items, True, exc
    return items, False, None


async def _aclose(stream: AsyncIterator[Any]) -> None:
    aclose = getattr(stream, "aclose", None)
    if aclose is not None:
        await aclose()


class LoopThread:
    """An event loop running on its own daemon thread (``name``) until ``stop``.

    ``setup``: a coroutine run on the loop before ``start`` returns (its error is raised by
    ``start``); ``teardown``: one run on the loop after it stops, before it closes.
    ``owner`` names the object using it in the error raised when it is called from the
    loop's own thread (which would wait for itself forever)."""

    def __init__(
        self,
        name: str,
        *,
        owner: str | None = None,
        setup: Callable[[], Awaitable[object]] | None = None,
        teardown: Callable[[], Awaitable[object]] | None = None,
        exception_handler: Callable[[asyncio.AbstractEventLoop, dict[str, Any]], object]
        | None = None,
    ) -> None:
        self.loop = asyncio.new_event_loop()
        """The loop; touch it from other threads only through this object."""
        if exception_handler is not None:
            self.loop.set_exception_handler(exception_handler)
        self._owner = owner or name
        self._setup = setup
        self._teardown = teardown
        self._thread = threading.Thread(target=self._main, name=name, daemon=True)
        self._started = threading.Event()
        self._error: BaseException | None = None

    # -- lifecycle -------------------------------------------------------------------------
    def start(self, timeout: float = START_TIMEOUT) -> None:
        """Start the thread; returns once ``setup`` ran (raising what it raised) or
        ``LoopStartError`` when it did not finish within ``timeout`` seconds."""
        self._thread.start()
        if not self._started.wait(timeout):
            raise LoopStartError(f"{self._owner}: the event loop did not start")
        if self._error is not None:
            raise self._error

    def _main(self) -> None:
        loop = self.loop
        asyncio.set_event_loop(loop)
        try:
            if self._setup is not None:
                try:
                    loop.run_until_complete(self._setup())
                except BaseException as exc:  # reported to start() in the caller's thread
                    self._error = exc
                    return
                finally:
                    self._started.set()
            else:
                self._started.set()
            loop.run_forever()
        finally:
            try:
                if self._teardown is not None:
                    loop.run_until_complete(self._teardown())
                loop.run_until_complete(loop.shutdown_asyncgens())
            finally:
                loop.close()

    def stop(self, timeout: float | None = START_TIMEOUT) -> None:
        """Stop the loop and wait up to ``timeout`` seconds (None: for ever) for its thread
        to run ``teardown`` and close it (idempotent)."""
        if self._thread.is_alive():
            with contextlib.suppress(RuntimeError):  # closed by the thread meanwhile
                self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(timeout)

    @property
    def running(self) -> bool:
        """Whether the thread is alive (started and not stopped)."""
        return self._thread.is_alive()

    def in_loop_thread(self) -> bool:
        """Whether the caller runs on the loop's own thread."""
        return threading.current_thread() is self._thread

    # -- calling in ------------------------------------------------------------------------
    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        """Start ``coro`` on the loop; the future completes in the caller's thread."""
        if self.in_loop_thread():
            coro.close()
            raise RuntimeError(f"{self._owner} cannot be used from its own event loop thread")
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def run(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        """Run ``coro`` on the loop and block until it is done; an interrupted wait (e.g.
        ``KeyboardInterrupt``, or ``timeout`` seconds) cancels it, so no call is left
        running behind the caller's back."""
        future = self.submit(coro)
        try:
            return future.result(timeout)
        except BaseException:
            future.cancel()
            raise

    def iterate(
        self,
        stream: AsyncIterator[T],
        *,
        batch: int = 1,
        run: Callable[[Coroutine[Any, Any, Any]], Any] | None = None,
        alive: Callable[[], bool] | None = None,
    ) -> Generator[T, None, None]:
        """A blocking generator over an async iterator living on the loop: up to ``batch``
        items cross per handoff (an error after some items is raised once they are handed
        out); leaving it early closes the stream (``aclose``) while ``alive()`` says the
        owner is open. ``run``: the owner's way to run a coroutine (its closed check)."""
        call = run if run is not None else self.run
        try:
            while True:
                items, ended, error = call(next_items(stream, batch))
                yield from items
                if error is not None:
                    raise error
                if ended:
                    return
        finally:
            if alive is None or alive():
                with contextlib.suppress(ClientClosedError, RuntimeError):
                    call(_aclose(stream))
