"""The loop-stall meter's gap and collection figures, and the opt-in stack watchdog
(issue #12: why a pass of the peer's loop, or the time between two, ran long)."""

from __future__ import annotations

import gc
import threading
import time

import pytest
from server_fakes import EventRecorder

from raftlog.metrics import PeerMetrics
from raftlog.server.loop_health import LoopStallMeter
from raftlog.server.stall_watch import STACKS_ENV, GcPauses, StallWatchdog


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_gap_between_passes_is_measured_apart_from_the_passes() -> None:
    clock, log = FakeClock(), EventRecorder()
    meter = LoopStallMeter(50.0, PeerMetrics(), log, clock)
    try:
        meter.start()
        clock.now += 0.002
        meter.finish(clock.now, clock.now, clock.now)
        clock.now += 0.300  # not scheduled for 300 ms while "in poll"
        meter.start()
        clock.now += 0.001
        meter.finish(clock.now, clock.now, clock.now)
        assert meter.max_ms == 2.0  # no pass was long...
        assert meter.max_gap_ms == pytest.approx(302.0)  # ...but the loop was away
        assert meter.late_passes == 1
        late = [f for level, name, f in log.events if name == "loop_late"]
        assert late and late[0]["previous_pass_ms"] == 2.0
        summary = meter.summary()
        assert summary["max_loop_gap_ms"] == meter.max_gap_ms
        assert {"max_loop_stall_ms", "max_gc_pause_ms", "gc_collections"} <= set(summary)
    finally:
        meter.close()


def test_collections_are_timed_and_charged_to_the_pass() -> None:
    pauses = GcPauses(time.monotonic)
    pauses.install()
    try:
        gc.collect()
        assert pauses.collections >= 1 and pauses.max_generation == 2
        assert pauses.max_ms >= 0.0
        assert pauses.take_pass_ms() >= 0.0
        assert pauses.take_pass_ms() == 0.0  # taken
    finally:
        pauses.uninstall()
    assert pauses._on_gc not in gc.callbacks


def test_the_watchdog_logs_the_stack_of_a_pass_while_it_runs() -> None:
    log = EventRecorder()
    started: list[float | None] = [None]
    dog = StallWatchdog(20.0, lambda: started[0], log, time.monotonic)
    dog.start()
    try:
        started[0] = time.monotonic()
        deadline = time.monotonic() + 5.0
        while time.monotonic() < deadline and "loop_stall_stack" not in log.names():
            _busy_pass()  # the loop thread (this one) is "stuck" in here
        started[0] = None
    finally:
        dog.stop()
    stacks = [f for _, name, f in log.events if name == "loop_stall_stack"]
    assert len(stacks) == 1  # once per pass
    assert "_busy_pass" in str(stacks[0]["stack"])
    assert float(str(stacks[0]["running_ms"])) >= 20.0


def _busy_pass() -> None:
    end = time.monotonic() + 0.005
    while time.monotonic() < end:
        pass


def test_the_watchdog_is_opt_in(monkeypatch: pytest.MonkeyPatch) -> None:
    log = EventRecorder()
    monkeypatch.delenv(STACKS_ENV, raising=False)
    assert StallWatchdog.from_env(lambda: None, log, time.monotonic) is None
    monkeypatch.setenv(STACKS_ENV, "soon")
    assert StallWatchdog.from_env(lambda: None, log, time.monotonic) is None
    assert "stall_stacks_ignored" in log.names()
    monkeypatch.setenv(STACKS_ENV, "100")
    dog = StallWatchdog.from_env(lambda: None, log, time.monotonic)
    assert dog is not None
    before = threading.active_count()
    dog.start()
    dog.stop()
    assert threading.active_count() == before
