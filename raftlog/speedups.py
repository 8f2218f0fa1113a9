"""Which implementation of the per-entry and per-frame loops runs: compiled or pure Python.

Issue #28 measured the interpreter as most of a peer's CPU. Two optional C extensions hold
compiled twins of the loops every entry and every frame passes through:

- ``raftlog._speedups_records`` (``raftlog/_speedups_records.c``): sealing an appended
  entry's records, checking the stored CRC of each record a range read returns, and parsing
  each entry a follower or reader receives; twins of ``put_entries_py`` and
  ``take_payloads_py`` in ``raftlog.storage._records`` and ``parse_entries_py`` in
  ``raftlog.entry``; and the leader's decision on each RequestUpdate of a proposal batch,
  twin of ``decide_batch_py`` in ``raftlog.consensus.batch``;
- ``raftlog._speedups_transport`` (``raftlog/_speedups_transport.c``): multipart send and
  receive straight between libzmq and bytes objects; twins of the ``*_py`` functions in
  ``raftlog.transport``.

The pure-Python twins are the definition; the compiled ones must match them frame for frame
and error for error (``tests/unit/storage/test_speedups.py``,
``tests/unit/test_transport_twins.py``).

They are optional so that ``make run`` works on a machine with nothing but Python: the
install builds them when a C compiler and Python's headers are there, and when they are
missing the pure twins run; so they do when ``RAFTLOG_PURE_PYTHON=1`` is set (to compare, or
to rule the extensions out when chasing a bug). ``IMPLEMENTATION`` says which run in this
process; the peer logs it at start-up.
"""

from __future__ import annotations

import errno
import importlib
import os
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Final, Protocol, TypeVar

import zmq

_Entry = TypeVar("_Entry")
"""``raftlog.entry.LogEntry`` (a type variable: ``entry`` imports this module)."""

PURE_PYTHON_ENV: Final = "RAFTLOG_PURE_PYTHON"


class CompiledRecords(Protocol):
    """What ``raftlog._speedups_records`` offers: the one typed description of the module,
    which is imported only here (its test hook ``crc32`` aside)."""

    def put_entries(
        self,
        put: Callable[..., object],
        first_index: int,
        entries: Sequence[object],
        mirrors: object,
        requests: object,
    ) -> None:
        """Call ``put(key, value)`` for each entry record of ``entries``, then
        ``put(key, value, mirrors)`` and ``put(key, value, requests)`` for its id records."""

    def take_payloads(
        self,
        values: Iterable[bytes],
        first_index: int,
        max_bytes: int | None,
        on_bad: Callable[[int, bytes], object],
    ) -> tuple[list[bytes], bool]:
        """Verified entry bodies; ``on_bad(index, value)`` raises for a bad record."""

    def parse_entries(
        self, cls: type[_Entry], frames: Sequence[bytes], error_type: type[Exception]
    ) -> tuple[_Entry, ...]:
        """``cls.from_bytes`` of each frame; ``error_type`` for one too short."""

    def entries_bytes(self, entries: Sequence[_Entry]) -> list[bytes]:
        """``entry.to_bytes()`` of each entry, read from its cache where it has one."""

    def decide_batch(  # noqa: PLR0917 -- a C function's positional arguments
        self,
        requests: Sequence[tuple[bytes, bytes]],
        known: Sequence[int | None],
        prepare: Callable[[bytes], object] | None,
        low_ms: int | None,
        high_ms: int,
        term: int,
        next_index: int,
        kit: tuple[object, ...],
    ) -> tuple[list[Any], list[Any]] | None:
        """``decide_batch_py``'s ``(entries, results)``; None for a batch it leaves to it."""


class CompiledTransport(Protocol):
    """What ``raftlog._speedups_transport`` offers once bound (``bind`` is called here, in
    ``_bind_transport``). Sockets are passed as pyzmq's ``underlying`` address."""

    def recv_frames(self, socket: int) -> list[bytes]:
        """One whole message; ``zmq.Again`` if none is queued."""

    def recv_bounded(
        self, socket: int, limit: int, prop: str | None
    ) -> tuple[list[bytes], str | None, int, int, int, bool]:
        """``(parts, user, fd, total, count, too_large)`` of the next ROUTER message."""

    def send_frames(self, socket: int, frames: Sequence[bytes]) -> None:
        """Send one multipart message without blocking."""

    def send_routed(
        self, socket: int, routing: bytes, msg_id: bytes, body: Sequence[bytes]
    ) -> None:
        """Send a ROUTER reply without blocking."""

    def send_update_dones(
        self,
        socket: int,
        first: int,
        waiters: Sequence[tuple[bytes, bytes, bool]],
        encode: Callable[[int], Sequence[bytes]],
    ) -> int:
        """The final answers of a run of committed updates; how many were dropped."""

    def take_run(  # noqa: PLR0917 -- a C function's positional arguments
        self,
        socket: int,
        limit: int,
        shape: tuple[bytes, bytes, int, int],
        queue: list[tuple[bytes, bytes, bytes]],
        tally: dict[int, int],
        allowance: int,
        max_count: int,
    ) -> tuple[int, tuple[list[bytes], int, bool, int] | None]:
        """``(taken, other)``: a run of ROUTER messages of one shape into ``queue``."""


def _import(name: str) -> tuple[object | None, str]:
    if os.environ.get(PURE_PYTHON_ENV, "") not in ("", "0"):
        return None, "pure (RAFTLOG_PURE_PYTHON)"
    try:
        return importlib.import_module(name), "compiled"
    except ImportError:
        return None, f"pure ({name} not built)"


def _bind_transport(module: object) -> str:
    """Point the transport twin at the libzmq pyzmq loaded; "compiled" or why not."""
    try:
        from zmq.backend.cython import _zmq  # noqa: PLC0415 -- only pyzmq's Cython backend

        module.bind(_zmq.__file__, zmq.Again(errno.EAGAIN), zmq.ZMQError)  # type: ignore[attr-defined]
    except (ImportError, AttributeError, OSError) as exc:
        return f"pure (libzmq not reachable: {exc})"
    return "compiled"


_records_module, _records_state = _import("raftlog._speedups_records")
_transport_module, _transport_state = _import("raftlog._speedups_transport")
if _transport_module is not None:
    _transport_state = _bind_transport(_transport_module)
    if _transport_state != "compiled":
        _transport_module = None

records: CompiledRecords | None = _records_module  # type: ignore[assignment]
"""The compiled storage twins in use, or None when the pure ones run."""
transport: CompiledTransport | None = _transport_module  # type: ignore[assignment]
"""The compiled transport twins in use, or None when the pure ones run."""
IMPLEMENTATION: Final = f"records {_records_state}, transport {_transport_state}"
"""Which twins this process runs, and why not the compiled ones where it says pure."""
COMPILED: Final = {"records": records is not None, "transport": transport is not None}
"""Per set of twins, whether the compiled ones run (the ``raftlog_compiled_twins`` gauge)."""
