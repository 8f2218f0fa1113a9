"""``FloodLog``: repeated events logged once a second each, with a count.

Why: under a flood the same event (a refused connection, a failed accept) happens
thousands of times a second; a line -- or a traceback -- each filled 100 MB of log in five
minutes (issue #25). The HTTP listener's guard reports every event here and the log gets
one line per event name per ``REAP_INTERVAL`` with how many happened; ``totals`` keeps the
counts for ``/metrics``.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from typing import Any, Final

import structlog

log = structlog.get_logger("raftlog.http")

REAP_INTERVAL: Final = 1.0
"""Seconds between two lines of one event (and between two reaper passes of the guard)."""


class FloodLog:
    """Repeated events logged at most once per ``interval`` each, with how many happened:
    a flood produces a line a second, never a line (or a traceback) per connection."""

    def __init__(self, interval: float = REAP_INTERVAL,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._interval = interval
        self._clock = clock
        self._counts: Counter[str] = Counter()
        self._fields: dict[str, dict[str, Any]] = {}
        self._last: dict[str, float] = {}
        self.totals: Counter[str] = Counter()
        """Every event since start, by name (what ``/metrics`` shows)."""

    def event(self, name: str, **fields: Any) -> None:
        """Count one ``name`` event (its fields: the last one's are logged)."""
        self._counts[name] += 1
        self.totals[name] += 1
        self._fields[name] = fields
        if self._clock() - self._last.get(name, -self._interval) >= self._interval:
            self._emit(name)

    def flush(self) -> None:
        """Log what was counted since the last line of each event, if its interval passed."""
        now = self._clock()
        for name in [n for n, c in self._counts.items() if c]:
            if now - self._last.get(name, -self._interval) >= self._interval:
                self._emit(name)

    def _emit(self, name: str) -> None:
        count = self._counts.pop(name)
        self._last[name] = self._clock()
        log.warning(name, count=count, **self._fields.pop(name, {}))
