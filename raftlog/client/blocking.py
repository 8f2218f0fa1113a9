"""Blocking faces that delegate generically to the async clients.

Why: every blocking method used to be a hand-written twin restating its async method's
signature and call (~700 lines, the duplicate pairs of issue #26), so each new async method
needed a second one that could drift -- and several had (``read(wait_ms=)``,
``request_entries(from_peer=)`` never reached the blocking face). Now a blocking class
names each async method once::

    class SyncTopicClient(BlockingFace):
        publish = blocking(TopicClient.publish)
        subscribe = blocking_iter(TopicClient.subscribe)

``blocking`` is a descriptor typed with a ``ParamSpec``: mypy gives ``SyncTopicClient.publish``
exactly the async method's parameters with the awaited result type, so users keep precise
hints without a stub, and ``inspect.signature``/``help`` show the async method's signature
and docstring. At run time it runs the coroutine on the face's loop thread (``_run``);
``blocking_iter`` turns an async iterator into a blocking one (``_iterate``), and
``blocking_wrapped`` hands a result back in its blocking face (a ``Transaction`` as a
``SyncTransaction``). ``tests/unit/client/test_sync_faces.py`` fails when a public async
method has neither a blocking twin nor a stated reason.
"""

from __future__ import annotations

import functools
import inspect
import types
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator
from types import TracebackType
from typing import Any, Concatenate, Generic, ParamSpec, Self, TypeVar, overload

P = ParamSpec("P")
R = TypeVar("R")
W = TypeVar("W")
T = TypeVar("T")


class BlockingFace(ABC):
    """A blocking class whose methods run an async object's coroutines on a loop thread."""

    @property
    @abstractmethod
    def _delegate(self) -> Any:
        """The async object the methods are called on (lives on the loop thread)."""

    @abstractmethod
    def _run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Block until ``coro`` finished on the loop thread; its result or its error."""



class IteratingFace(BlockingFace):
    """A ``BlockingFace`` with ``blocking_iter`` methods: it also turns async iterators into
    blocking ones."""

    @abstractmethod
    def _iterate(self, stream: AsyncIterator[T], batch: int) -> Iterator[T]:
        """A blocking iterator over ``stream`` (living on the loop), ``batch`` items per
        handoff; leaving it early closes the stream."""


class ClosingFace(IteratingFace):
    """An ``IteratingFace`` that owns resources: ``with face:`` closes it on the way out."""

    @abstractmethod
    def close(self) -> None:
        """Release what the face owns (idempotent)."""

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


async def _made_on_loop(make: Callable[[], T]) -> T:
    """``make()`` on the loop thread: an async iterator is created where it will run."""
    return make()


class _Delegating(Generic[P, R]):
    """The descriptor behind ``blocking``: on an instance, a bound method with the async
    method's parameters that blocks for its result; on the class, the plain function (so
    ``help`` and ``inspect.signature`` see an ordinary method)."""

    def __init__(
        self,
        method: Callable[..., Any],
        call: Callable[[BlockingFace, Callable[[], Any]], R],
        returns: object,
    ) -> None:
        def unbound(face: BlockingFace, /, *args: Any, **kwargs: Any) -> R:
            return call(face, lambda: method(face._delegate, *args, **kwargs))

        functools.update_wrapper(unbound, method)
        del unbound.__wrapped__  # type: ignore[attr-defined]  # its own signature, below
        unbound.__signature__ = inspect.signature(method).replace(  # type: ignore[attr-defined]
            return_annotation=returns
        )
        self._unbound = unbound

    @overload
    def __get__(self, face: None, owner: type) -> Callable[Concatenate[Any, P], R]: ...
    @overload
    def __get__(self, face: BlockingFace, owner: type) -> Callable[P, R]: ...
    def __get__(self, face: BlockingFace | None, owner: type) -> Any:
        if face is None:
            return self._unbound
        return types.MethodType(self._unbound, face)


def blocking(method: Callable[Concatenate[Any, P], Coroutine[Any, Any, R]]) -> _Delegating[P, R]:
    """The blocking twin of the async method ``method`` (same parameters, its result)."""

    def call(face: BlockingFace, make: Callable[[], Coroutine[Any, Any, R]]) -> R:
        return face._run(make())

    return _Delegating(method, call, inspect.signature(method).return_annotation)


def blocking_iter(
    method: Callable[Concatenate[Any, P], AsyncIterator[T]],
    *,
    batch: int = 1,
    item: str | None = None,
) -> _Delegating[P, Iterator[T]]:
    """The blocking twin of ``method``, which returns an async iterator: a blocking
    iterator, ``batch`` items per handoff (1: each item as soon as it arrives -- a follower
    must not wait for a batch to fill); leaving it early closes the async one. ``item``
    names the item type for ``inspect.signature`` when the annotation is no
    ``AsyncIterator[...]``."""

    def call(face: BlockingFace, make: Callable[[], AsyncIterator[T]]) -> Iterator[T]:
        if not isinstance(face, IteratingFace):
            raise TypeError(f"{type(face).__name__} is no IteratingFace: it cannot iterate")
        return face._iterate(face._run(_made_on_loop(make)), batch)

    return _Delegating(method, call, f"Iterator[{item or _item_type(method)}]")


def blocking_wrapped(
    method: Callable[Concatenate[Any, P], Coroutine[Any, Any, R]],
    wrap: Callable[[Any, R], W],
) -> _Delegating[P, W]:
    """The blocking twin of ``method`` whose result comes back in its own blocking face:
    ``wrap(face, result)``."""

    def call(face: BlockingFace, make: Callable[[], Coroutine[Any, Any, R]]) -> W:
        return wrap(face, face._run(make()))

    return _Delegating(method, call, inspect.signature(wrap).return_annotation)


def _item_type(method: Callable[..., Any]) -> str:
    """``X`` of an ``AsyncIterator[X]`` return annotation (as written), else ``Any``."""
    returns = str(inspect.signature(method).return_annotation)
    prefix = "AsyncIterator["
    return returns[len(prefix):-1] if returns.startswith(prefix) else "Any"
