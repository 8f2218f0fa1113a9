"""Per-process wall-clock offset for the clock-fault tests (issue #24): imported by Python at
start-up when this directory is on a peer's ``PYTHONPATH`` (``faults.wallclock``).

It shifts ``time.time`` and ``time.time_ns`` -- the wall clock, as an NTP step or a VM
migration does -- by the number of seconds written in the file named by
``RAFTLOG_TEST_WALL_OFFSET_FILE`` (re-read at most every 20 ms, so a test steps the clock of a
running peer by rewriting the file). The monotonic clock is left alone, as NTP leaves it.

Why not libfaketime: with ``FAKETIME_DONT_FAKE_MONOTONIC=1`` (the only way to step the wall
clock alone) Debian's libfaketime 0.9.10 makes ``select`` fail with EINVAL and ``zmq_poll``
return at once (a busy peer), and without it every monotonic clock jumps to the faked epoch.
"""

from __future__ import annotations

import os
import time

_PATH = os.environ.get("RAFTLOG_TEST_WALL_OFFSET_FILE")

if _PATH:
    _real_time = time.time
    _real_time_ns = time.time_ns
    _mono = time.monotonic
    _state = [0.0, -1.0]  # offset in seconds, monotonic time of the next look at the file

    def _offset() -> float:
        now = _mono()
        if now >= _state[1]:
            _state[1] = now + 0.02
            try:
                with open(_PATH, encoding="ascii") as file:
                    _state[0] = float(file.read().strip() or 0)
            except (OSError, ValueError):
                pass  # being rewritten: keep the last offset
        return _state[0]

    def _time() -> float:
        return _real_time() + _offset()

    def _time_ns() -> int:
        return _real_time_ns() + int(_offset() * 1e9)

    time.time = _time
    time.time_ns = _time_ns
