"""``forget_traceback``: what a write to a client that hung up leaves behind, freed at once.

Why: asyncio fails a write to a connection that was lost by setting the exception on the
drain waiter the writer awaits (aiohttp's and asyncio's streams alike), and raising it from
there gives it a traceback through the waiter's own frame -- which holds the waiter. That
cycle (waiter -> exception -> traceback -> frame -> waiter) keeps every frame the exception
passed through, with their locals: the connection, the request, and the answer being
written (a REST poll's up to 6 MiB, a Kafka Fetch's up to 50 MiB), until Python's cyclic
collector runs -- which it does by counting allocations, not bytes. A hundred REST polls
whose clients hung up held 700 MiB that way (``tests/faults/test_rest_woken_polls.py``).
A listener that catches such an error drops the traceback, and the frames go by reference
counting.
"""

from __future__ import annotations


def forget_traceback(exc: BaseException) -> None:
    """Drop the tracebacks of ``exc`` and of the exceptions it chains (module docstring)."""
    seen: set[int] = set()
    todo: BaseException | None = exc
    while todo is not None and id(todo) not in seen:
        seen.add(id(todo))
        todo.__traceback__ = None
        todo = todo.__context__ or todo.__cause__


__all__ = ["forget_traceback"]
