"""Seeded random simulations: Raft's invariants after every step, liveness after healing.

Defaults: 300 seeds x 3000 chaos steps (plus the liveness phase). Environment knobs:
``RAFTLOG_SIM_SEEDS`` (how many seeds, from 0), ``RAFTLOG_SIM_STEPS`` (chaos steps per seed),
``RAFTLOG_SIM_SEED`` (re-run only these seeds, comma separated -- a failure prints the command).
"""

from __future__ import annotations

import os
from collections import Counter

import pytest

from sim.scenario import random_params, run_simulation

SEEDS = int(os.environ.get("RAFTLOG_SIM_SEEDS", "300"))
STEPS = int(os.environ.get("RAFTLOG_SIM_STEPS", "3000"))
ONLY = os.environ.get("RAFTLOG_SIM_SEED")
SEED_LIST = [int(seed) for seed in ONLY.split(",")] if ONLY else list(range(SEEDS))


@pytest.mark.parametrize("seed", SEED_LIST)
def test_raft_invariants_hold_under_random_faults(seed: int) -> None:
    stats = run_simulation(random_params(seed, STEPS))
    assert stats.ticks >= STEPS


def test_random_runs_exercise_every_fault_and_feature() -> None:
    """Guards the simulator against silently losing coverage (e.g. after a refactoring)."""
    total: Counter[str] = Counter()
    for seed in range(40):
        stats = run_simulation(random_params(seed, 2000))
        total.update(stats.counters)
        total.update({"config_" + name: count for name, count in stats.config_results.items()})
        total["committed"] += stats.committed
        total["elections"] += stats.elections
    for needed in (
        "crash_crash",
        "crash_before_persist",
        "crash_after_persist",
        "snapshot_install",
        "compaction",
        "truncation",
        "ConfigChangeCompleted",
        "config_ConfigAccepted",
        "config_ConfigBusy",
        "SteppedDown",
        "swap_kind",
        "unmarked_answer",
    ):
        assert total[needed] > 0, f"no {needed} in 40 random runs: {dict(total)}"
    assert total["committed"] > 2000 and total["elections"] > 100
