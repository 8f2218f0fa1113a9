"""The fault schedules against real processes, short versions (``make test``); ``make chaos``
runs the same schedules long and with many seeds (``faults.chaos``).

Each is a named test with a fixed seed (replay another one with ``RAFTLOG_CHAOS_SEED``;
lengthen with ``RAFTLOG_CHAOS_SECONDS``). A run must (1) have done its fault (guards), then
(2) keep every promise the checker knows. Election stability under a one-way link, CPU
starvation and RequestEntries bursts (issue #12, fixed) is a timing expectation: on a
machine loaded many times over an election can still happen, so here it is reported as
xfail *after* the safety checks passed (never instead of them); ``make chaos`` and
``make stability`` measure it (docs/reliability.md). The full follower's exit code is
behaviour, not timing, and is asserted.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from faults.clock_schedules import time_problems
from faults.consumers import check_groups
from faults.harness import RunResult, run_schedule
from faults.schedules import POWER_SCHEDULES, SCHEDULES, unmet_guards
from raftlog.topics.groups import table

SECONDS = float(os.environ.get("RAFTLOG_CHAOS_SECONDS", "3"))
"""Seconds of faults per schedule: one round of each fault is the coverage ``make test``
wants (a run goes on past this until its guards are met, ``Schedule.run_options``); more
rounds and seeds are ``make chaos``."""
SEEDS = {name: 1000 + n for n, name in enumerate(SCHEDULES)}
LOAD_DEPENDENT_STABILITY = {
    "one_way_partition": "a one-way link to a follower",
    "cpu_starvation": "CPU starvation",
    "entries_burst": "bursts of unread RequestEntries streams",
}
"""Schedules whose "no election" depends on the machine's load (module docstring)."""


def run(name: str, tmp_path: Path, seconds: float = SECONDS) -> RunResult:
    schedule = SCHEDULES[name]
    options = schedule.run_options(seconds)
    seed = int(os.environ.get("RAFTLOG_CHAOS_SEED", SEEDS[name]))
    result = run_schedule(name, schedule.fault, tmp_path, seed, options)
    print(f"{name} seed={seed} {result.row()} did={result.did}")
    assert not unmet_guards(schedule, result.did), (
        f"the fault did not happen enough: {unmet_guards(schedule, result.did)}"
    )
    assert result.report.valid, f"seed {seed}: {result.report.summary()}"
    assert not time_problems(result.did), f"seed {seed}: {time_problems(result.did)}"
    return result


@pytest.mark.parametrize(
    "name",
    [n for n in SCHEDULES if n not in POWER_SCHEDULES and n != "queue_group_leader_kill"],
)
def test_schedule(name: str, tmp_path: Path) -> None:
    result = run(name, tmp_path)
    if name == "stale_leader_pause":
        # one election per pause: the resumed old leader follows the new one (issue #12) --
        # but after a pause past the peer links' heartbeat time-out (a loaded machine's slow
        # election) nothing of the new leader waits for it, and it may campaign once
        allowed = result.did["pauses"] + result.did.get("long_pauses", 0)
        assert result.elections <= allowed, (
            f"{result.elections} elections for {result.did['pauses']} pause(s), "
            f"{result.did.get('long_pauses', 0)} of them long"
        )
    if name == "full_disk_follower":
        assert "exit_code_3" in result.did, (
            f"the full follower did not exit with the documented 3: {result.did}"
        )
    if name in LOAD_DEPENDENT_STABILITY and result.elections:
        pytest.xfail(
            f"{result.elections} election(s) with a healthy leader under "
            f"{LOAD_DEPENDENT_STABILITY[name]}: a timing expectation on a loaded machine "
            "(make chaos and make stability measure it); every safety check passed"
        )


def test_queue_group_checker_catches_a_planted_double_ack(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The consumer-group schedule's history passes the group checker (``test_schedule``
    runs it); the same history replayed with an ack that counts a record acked but keeps
    its lease (a double ack waiting to happen) fails it: the check is not vacuous."""
    result = run("queue_group_leader_kill", tmp_path)
    assert result.groups is not None
    log, served = result.groups
    assert check_groups(log, served).valid
    real_ack = table.GroupTable._ack

    def keeping_ack(self: table.GroupTable, group: table.Group, member: str,
                    ids: list[list[object]]) -> None:
        kept = dict(group.leases)
        real_ack(self, group, member, ids)  # type: ignore[arg-type]
        group.leases.update(kept)  # the bug: acked, and still leased (redelivered later)

    monkeypatch.setattr(table.GroupTable, "_ack", keeping_ack)
    report = check_groups(log, served)
    assert report.unbalanced and report.diverged and not report.valid
