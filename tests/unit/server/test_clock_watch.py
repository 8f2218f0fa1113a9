"""The host-clock metric and warning (issue #24): decides nothing, shows a far-off clock."""

from __future__ import annotations

from types import SimpleNamespace

from raftlog.metrics import PeerMetrics
from raftlog.server.clock_watch import ClockWatch


class Log:
    def __init__(self) -> None:
        self.warnings: list[tuple[str, dict[str, object]]] = []

    def info(self, event: str, **fields: object) -> None:
        pass

    def warning(self, event: str, **fields: object) -> None:
        self.warnings.append((event, fields))


def test_the_offset_is_exported_and_a_far_off_clock_warned_once_a_minute() -> None:
    offset: list[int | None] = [None]
    metrics, log = PeerMetrics(), Log()
    watch = ClockWatch(SimpleNamespace(wall_offset_ms=lambda: offset[0]), metrics, log)
    watch.check(0.0)  # no time in the log yet: nothing to say
    assert list(metrics.wall_clock_offset_seconds.samples()) == []
    offset[0] = 2_000
    watch.check(1.0)
    assert [s.value for s in metrics.wall_clock_offset_seconds.samples()] == [2.0]
    assert log.warnings == []
    offset[0] = -3_600_000
    watch.check(2.0)
    watch.check(30.0)
    assert [e for e, _ in log.warnings] == ["wall_clock_off"]
    assert log.warnings[0][1]["offset_s"] == -3600.0
    watch.check(62.5)
    assert len(log.warnings) == 2
    assert [s.value for s in metrics.wall_clock_offset_seconds.samples()] == [-3600.0]
