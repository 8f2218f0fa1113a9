"""Which implementation of the storage layer's per-entry loops runs: compiled or pure Python.

Issue #28 measured the interpreter as most of a peer's CPU. ``raftlog._speedups`` (C, built by
the install when a compiler and Python's headers are there) holds compiled twins of the two
loops that run once per entry: sealing an appended entry's records and checking the stored
CRC of each record a range read returns. The pure-Python twins in
``raftlog.storage._records`` are the definition; the compiled ones must match them record for
record and error for error (``tests/unit/storage/test_speedups.py``).

The module is optional so that ``make run`` works on a machine with nothing but Python: when
it is missing the pure twins run, and so they do when ``RAFTLOG_PURE_PYTHON=1`` is set (to
compare, or to rule the extension out when chasing a bug). ``IMPLEMENTATION`` says which one
this process runs; the peer logs it at start-up and exports it as a metric label.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Final, Protocol

if TYPE_CHECKING:
    from raftlog.entry import LogEntry

PURE_PYTHON_ENV: Final = "RAFTLOG_PURE_PYTHON"


class CompiledLoops(Protocol):
    """What ``raftlog._speedups`` offers (its stub is ``raftlog/_speedups.pyi``)."""

    def put_entries(
        self, put: Callable[[bytes, bytes], object], first_index: int, entries: Sequence[LogEntry]
    ) -> None:
        """Call ``put(key, value)`` for each sealed record of ``entries``."""

    def take_payloads(
        self,
        values: Iterable[bytes],
        first_index: int,
        max_bytes: int | None,
        on_bad: Callable[[int, bytes], object],
    ) -> tuple[list[bytes], bool]:
        """Verified entry bodies; ``on_bad(index, value)`` raises for a bad record."""


def _load() -> tuple[CompiledLoops | None, str]:
    if os.environ.get(PURE_PYTHON_ENV, "") not in ("", "0"):
        return None, "pure (RAFTLOG_PURE_PYTHON)"
    try:
        from raftlog import _speedups  # noqa: PLC0415 -- optional: absent without a compiler
    except ImportError:
        return None, "pure (raftlog._speedups not built)"
    return _speedups, "compiled"


compiled, IMPLEMENTATION = _load()
"""``compiled``: the ``raftlog._speedups`` module in use, or None when the pure twins run.
``IMPLEMENTATION``: "compiled", or "pure (<why>)"."""
