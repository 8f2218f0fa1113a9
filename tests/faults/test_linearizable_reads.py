"""Linearizable reads over real processes under a paused leader and a partitioned leader
(issue #29): the fault schedules of ``faults.schedules`` run with the usual workload, plus a
reader (``faults.reads``) whose every answered read must hold the newest write
acknowledged before it began. The write history is checked as in every schedule."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from integration.cluster import wait_for

from faults.harness import Chaos, run_schedule
from faults.reads import LinearizableReader, ReadOp, check_reads
from faults.schedules import SCHEDULES, unmet_guards

SECONDS = float(os.environ.get("RAFTLOG_CHAOS_SECONDS", "4"))
MIN_ANSWERED = 15
"""Answered reads a run needs to mean anything; the reader goes on after the fault until it
has them (under a CPU hog the fault's 4 s once answered 14)."""


def answered_now(reader: LinearizableReader) -> int:
    """The reader's answered reads so far (its thread appends them)."""
    return sum(1 for r in list(reader.reads) if r.outcome == "ok")


@pytest.mark.parametrize("name", ["stale_leader_pause", "leader_partition"])
def test_linearizable_reads_through_a_stale_leader(name: str, tmp_path: Path) -> None:
    schedule = SCHEDULES[name]
    options = schedule.run_options(SECONDS)
    seed = int(os.environ.get("RAFTLOG_CHAOS_SEED", "2900"))
    readers: list[LinearizableReader] = []
    during: list[int] = []

    def fault(chaos: Chaos) -> None:
        reader = LinearizableReader(chaos.cluster.urls, chaos.cluster.peers.ident,
                                    chaos.workload, seed)
        readers.append(reader)
        reader.start()
        try:
            schedule.fault(chaos)
            during.append(answered_now(reader))
            # a loaded machine answers fewer reads in the fault's seconds: read on (the
            # cluster as the fault left it, before healing) until there are enough
            wait_for("enough answered linearizable reads",
                     lambda: answered_now(reader) >= MIN_ANSWERED, 60)
        finally:
            reader.stop()

    result = run_schedule(name, fault, tmp_path, seed, options)
    assert not unmet_guards(schedule, result.did), unmet_guards(schedule, result.did)
    assert result.report.valid, result.report.summary()
    (reader,) = readers
    answered = [r for r in reader.reads if r.outcome == "ok"]
    print(f"{name}: {len(reader.reads)} reads, {len(answered)} answered, {during[0]} of "
          "them during the fault")
    assert len(answered) >= MIN_ANSWERED, "too few linearizable reads to mean anything"
    assert check_reads(reader.reads) == []


def test_the_read_checker_catches_a_stale_answer() -> None:
    """Negative control of the checker: an answer without the acknowledged target, or with
    other data at it, is flagged; a refusal is not."""
    fresh = ReadOp(1.0, 10, b"w0-3", "tcp://a", 10, b"w0-3", "ok")
    newer = ReadOp(1.0, 10, None, None, 12, b"x", "ok")
    stale = ReadOp(1.0, 10, b"w0-3", "tcp://b", 9, b"w0-2", "ok")
    empty = ReadOp(1.0, 10, None, "tcp://b", None, None, "ok")
    other = ReadOp(1.0, 10, b"w0-3", "tcp://c", 10, b"w1-1", "ok")
    refused = ReadOp(1.0, 10, b"w0-3", "tcp://b", None, None, "fail")
    assert check_reads([fresh, newer, refused]) == []
    assert len(check_reads([stale, empty, other])) == 3
