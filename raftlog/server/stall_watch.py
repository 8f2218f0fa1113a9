"""What holds the peer's loop up besides its own work: garbage collection, the host's
scheduler, and -- on request -- where the loop is when a pass runs long.

Issue #12 asks for zero elections with a healthy leader under CPU starvation, and a pass of
the loop that runs past the election timeout starves heartbeats. ``LoopStallMeter`` times the
passes; this module supplies the facts that say *why* one was long:

* ``GcPauses`` times every garbage collection (``gc.callbacks``), so a stall log line says how
  much of the pass was the collector, and the longest collection is reported at shutdown;
* ``StallWatchdog`` (opt-in: ``RAFTLOG_STALL_STACKS_MS``, e.g. 100) is a daemon thread that
  logs the loop thread's stack once per pass that has run longer than that -- while it is
  still running, which a profiler's aggregate cannot show. It needs the GIL to look, so a C
  call that holds the GIL is seen as soon as it returns (the stack then shows its caller).
"""

from __future__ import annotations

import gc
import os
import sys
import threading
import traceback
from collections.abc import Callable
from typing import Any, Final

from raftlog.server.interfaces import EventLog

STACKS_ENV: Final = "RAFTLOG_STALL_STACKS_MS"
"""Environment variable: log the loop's stack when a pass runs longer than this (ms)."""
STACK_FRAMES: Final = 14
"""Innermost frames logged per captured stack."""


class GcPauses:
    """Times collections: ``pass_ms`` since the last ``take_pass_ms``, the longest (``max_ms``,
    with its generation) and how many ran. Collections in other threads count too (the
    collector stops every thread that needs the GIL)."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self.max_ms = 0.0
        self.max_generation = -1
        self.collections = 0
        self._pass_ms = 0.0
        self._clock = clock
        self._began: float | None = None

    def install(self) -> None:
        """Start timing collections (idempotent)."""
        if self._on_gc not in gc.callbacks:
            gc.callbacks.append(self._on_gc)

    def uninstall(self) -> None:
        """Stop timing: a closed peer must not leave a callback in the interpreter."""
        if self._on_gc in gc.callbacks:
            gc.callbacks.remove(self._on_gc)

    def _on_gc(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._began = self._clock()
            return
        began, self._began = self._began, None
        if began is None:
            return
        ms = (self._clock() - began) * 1000.0
        self.collections += 1
        self._pass_ms += ms
        if ms > self.max_ms:
            self.max_ms = round(ms, 1)
            self.max_generation = int(info.get("generation", -1))

    def take_pass_ms(self) -> float:
        """Milliseconds spent collecting since the previous call."""
        ms, self._pass_ms = self._pass_ms, 0.0
        return round(ms, 1)


class StallWatchdog:
    """Logs the loop thread's stack (``loop_stall_stack``) once per pass that is still running
    after ``after_ms``. ``pass_started()`` gives the monotonic start of the pass in progress,
    or None between passes. Start it from the loop thread (its stack is the one watched)."""

    def __init__(
        self,
        after_ms: float,
        pass_started: Callable[[], float | None],
        log: EventLog,
        clock: Callable[[], float],
    ) -> None:
        self._after = after_ms / 1000.0
        self._pass_started = pass_started
        self._log = log
        self._clock = clock
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._loop_ident = 0
        self._captured: float | None = None

    @staticmethod
    def from_env(
        pass_started: Callable[[], float | None], log: EventLog, clock: Callable[[], float]
    ) -> StallWatchdog | None:
        """The watchdog if ``RAFTLOG_STALL_STACKS_MS`` asks for one (a positive number)."""
        raw = os.environ.get(STACKS_ENV, "").strip()
        if not raw:
            return None
        try:
            after_ms = float(raw)
        except ValueError:
            log.warning("stall_stacks_ignored", value=raw[:32], reason="not a number")
            return None
        return StallWatchdog(after_ms, pass_started, log, clock) if after_ms > 0 else None

    def start(self) -> None:
        """Watch the calling thread (the loop's) from a daemon thread (idempotent)."""
        if self._thread is not None:
            return
        self._loop_ident = threading.get_ident()
        self._thread = threading.Thread(target=self._watch, name="stall-watchdog", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """End the watching thread (waits for it at most a second)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(1.0)

    def _watch(self) -> None:
        period = max(0.005, self._after / 4)
        while not self._stop.wait(period):
            started = self._pass_started()
            if started is None or started == self._captured:
                continue
            running = self._clock() - started
            if running < self._after:
                continue
            frame = sys._current_frames().get(self._loop_ident)
            if frame is None:
                return
            self._captured = started
            stack = traceback.format_stack(frame)[-STACK_FRAMES:]
            del frame
            self._log.warning(
                "loop_stall_stack",
                running_ms=round(running * 1000.0, 1),
                stack="".join(stack),
            )
