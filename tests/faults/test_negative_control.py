"""Negative control with real processes: a deliberately broken peer must be caught.

All peers run with the test-only bug switch ``RAFTLOG_FAILPOINTS=sync=skip`` (every RocksDB
write stays in memory: acknowledgements before anything is durable). The all-peers-crash
schedule then loses acknowledged writes, and the checker must say so — the proof that a
green schedule means something.
"""

from __future__ import annotations

from pathlib import Path

from faults.harness import run_schedule
from faults.schedules import SCHEDULES


def test_checker_catches_a_peer_that_acks_before_fsync(tmp_path: Path) -> None:
    schedule = SCHEDULES["all_peers_crash"]
    options = schedule.options()
    options.duration = 4.0
    options.failpoints = {"*": "sync=skip"}
    result = run_schedule("all_peers_crash+ack_before_fsync", schedule.fault, tmp_path, 7, options)
    assert result.did.get("crashes", 0) >= 1
    report = result.report
    assert not report.valid
    assert report.count("lost") > 0, report.summary()
