"""Per-process CPU time, resident memory and the machine's load, read from /proc.

Why: the benchmark machine is shared (2 cores, several engineers' test suites); wall-clock
rates swing with other people's work, while the CPU seconds a peer spends per entry hardly
do. Every section therefore reports a CPU figure next to its rates, and the load average
before and after the run.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

_TICK = os.sysconf("SC_CLK_TCK")
_PAGE = os.sysconf("SC_PAGE_SIZE")


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds process ``pid`` (all its threads) used so far; 0.0 if it is
    gone."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / _TICK


def total_cpu(pids: Iterable[int]) -> float:
    """``cpu_seconds`` summed over ``pids``."""
    return sum(cpu_seconds(pid) for pid in pids)


def rss_bytes(pid: int) -> int:
    """Resident set size of process ``pid`` now (0 if it is gone)."""
    try:
        with open(f"/proc/{pid}/statm", encoding="ascii") as f:
            return int(f.read().split()[1]) * _PAGE
    except OSError:
        return 0


def load_average() -> str:
    """The 1/5/15-minute load average, as ``1.23 / 4.56 / 7.89``."""
    one, five, fifteen = os.getloadavg()
    return f"{one:.2f} / {five:.2f} / {fifteen:.2f}"
