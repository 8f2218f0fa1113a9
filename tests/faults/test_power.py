"""Power-cut schedules against real peers on lazy file systems (``faults.power``), short
versions; ``make chaos`` runs them long with many seeds. Each run must have cut power as its
guards ask, every peer must have come back by itself, and the checker must find nothing."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from faults.schedules import POWER_SCHEDULES
from faults.test_schedules import run


@pytest.mark.parametrize("name", POWER_SCHEDULES)
def test_power_cut_schedule(name: str, tmp_path: Path) -> None:
    # 2 s of faults by default: each cycle of these schedules is a whole restart, and the
    # run goes on until its guards are met (Schedule.run_options); RAFTLOG_CHAOS_SECONDS
    # lengthens them as for every schedule
    run(name, tmp_path, float(os.environ.get("RAFTLOG_CHAOS_SECONDS", "2")))
