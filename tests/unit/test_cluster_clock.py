"""The cluster clock (issue #24): step-proof, never back, continues from the log."""

from __future__ import annotations

import pytest

from raftlog.cluster_clock import (
    SLEW,
    ClusterClock,
    decode_time_checkpoint,
    encode_time_checkpoint,
)
from raftlog.entry import CHECKPOINT_DATA
from raftlog.ids import is_expired, is_fresh, make_request_id

HOUR_MS = 3_600_000
T0 = 1_700_000_000_000


class Host:
    """A host whose wall clock can step while its monotonic clock runs on."""

    def __init__(self) -> None:
        self.mono = 100.0
        self.offset_ms = 0
        self.log_clock = 0

    @property
    def true_ms(self) -> int:
        return T0 + int((self.mono - 100.0) * 1000)

    def wall(self) -> int:
        return self.true_ms + self.offset_ms

    def run(self, seconds: float, clock: ClusterClock, step: float = 0.05) -> list[int]:
        seen = []
        for _ in range(round(seconds / step)):
            self.mono += step
            seen.append(clock.now())
        return seen


def clock_on(host: Host) -> ClusterClock:
    return ClusterClock(lambda: host.log_clock, wall=host.wall, mono=lambda: host.mono)


@pytest.mark.parametrize("step_ms", [HOUR_MS, 9 * HOUR_MS, -HOUR_MS, -9 * HOUR_MS])
def test_a_wall_step_of_any_size_moves_the_clock_by_at_most_the_slew(step_ms: int) -> None:
    host = Host()
    clock = clock_on(host)
    assert clock.now() == T0
    host.run(10, clock)
    host.offset_ms = step_ms  # the step lasts 4 s, then NTP steps back
    during = host.run(4, clock)
    host.offset_ms = 0
    after = host.run(60, clock)
    seen = during + after
    assert seen == sorted(seen)  # never goes back
    assert abs(during[-1] - host.true_ms + 60_000) <= 4_000 * SLEW + 1
    assert abs(after[-1] - host.true_ms) <= 2  # converged back onto true time


def test_it_approaches_a_wall_clock_it_lags_at_the_slew_rate_only() -> None:
    host = Host()
    host.log_clock = T0 - 100_000  # the log was last stamped 100 s ago (a restart)
    clock = clock_on(host)
    assert clock.now() == T0 - 100_000  # continues from the log, not from the wall
    seen = host.run(100, clock)
    assert seen[-1] == pytest.approx(host.true_ms - 100_000 + 100_000 * SLEW, abs=2)


def test_a_new_leader_continues_from_the_log_clock_it_applied() -> None:
    host = Host()
    host.offset_ms = 9 * HOUR_MS  # this host booted 9 h ahead
    host.log_clock = T0
    clock = clock_on(host)
    assert clock.peek() == T0  # a follower's timer pass observes what it applied
    host.mono += 2.0
    assert T0 + 2_000 <= clock.now() <= T0 + 2_000 * (1 + SLEW) + 1
    host.log_clock = T0 + 60_000  # another leader stamped later: follow it
    assert clock.now() == T0 + 60_000


def test_an_unstamped_log_has_no_time_until_a_leader_bootstraps_it() -> None:
    host = Host()
    clock = clock_on(host)
    assert clock.peek() is None and clock.wall_offset_ms() is None
    assert clock.now() == host.wall()
    host.offset_ms = HOUR_MS
    assert clock.wall_offset_ms() == HOUR_MS
    assert clock.latest_ms() == host.wall()


def test_time_checkpoints_round_trip_and_the_reference_nil_is_no_time() -> None:
    assert decode_time_checkpoint(encode_time_checkpoint(T0)) == T0
    assert decode_time_checkpoint(CHECKPOINT_DATA) is None
    assert decode_time_checkpoint(b"\xcf\x00") is None
    with pytest.raises(ValueError, match="64 bits"):
        encode_time_checkpoint(-1)


def test_a_forgotten_id_is_always_refused_by_the_same_clock() -> None:
    ttl, margin = 8 * HOUR_MS, 15 * 60_000
    for age_s in range(0, 9 * 3600, 60):
        rid = make_request_id((T0 // 1000) - age_s, b"abc", 1, age_s)
        for later in (0, 1, 60_000, HOUR_MS):  # the leader's clock is at or past the log's
            if is_expired(rid, T0, ttl):
                assert not is_fresh(rid, T0 + later, ttl, margin, latest_ms=T0 + 10 * HOUR_MS)


def test_the_future_edge_may_follow_the_wall_clock_the_past_edge_never() -> None:
    ttl, margin = 8 * HOUR_MS, 15 * 60_000
    behind = T0 - 2 * HOUR_MS  # a cluster clock resuming after an outage
    honest = make_request_id(T0 // 1000, b"abc", 1, 1)
    assert not is_fresh(honest, behind, ttl, margin)
    assert is_fresh(honest, behind, ttl, margin, latest_ms=T0)
    old = make_request_id((behind - ttl + margin) // 1000 - 1, b"abc", 1, 2)
    assert not is_fresh(old, behind, ttl, margin, latest_ms=T0 + 9 * HOUR_MS)
