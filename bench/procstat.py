"""Per-process CPU time, resident memory and the machine's load, read from /proc.

Why: the benchmark machine is shared (2 cores, several engineers' test suites); wall-clock
rates swing with other people's work, while the CPU seconds a peer spends per entry hardly
do. Every section therefore reports a CPU figure next to its rates, and the load average
before and after the run.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

_TICK = os.sysconf("SC_CLK_TCK")
_PAGE = os.sysconf("SC_PAGE_SIZE")


def _user_system(stat: str) -> tuple[float, float]:
    """User and system CPU seconds from the text of a ``/proc/.../stat`` file (the fields
    after the command name, which may itself hold spaces and parentheses)."""
    fields = stat.rsplit(")", 1)[1].split()
    return int(fields[11]) / _TICK, int(fields[12]) / _TICK


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds process ``pid`` (all its threads) used so far.

    Raises ``ProcessLookupError`` once the process has exited: a per-update figure taken
    across a peer's exit would be false (its CPU would vanish from the sum), so the bench
    stops and says so instead of printing it."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            user, system = _user_system(f.read())
    except FileNotFoundError:
        raise ProcessLookupError(f"process {pid} has exited: no CPU figure") from None
    return user + system


@dataclass(frozen=True, slots=True)
class ThreadTimes:
    """One thread's cumulative times, in seconds."""

    user: float
    system: float
    waiting: float
    """Runnable but not running: waiting for a core (``schedstat``'s second field)."""
    sleeps: int = 0
    """Voluntary context switches: how often the thread went to sleep (a poll with nothing
    to read, a blocking sync), i.e. how often something had to wake it again."""
    preemptions: int = 0
    """Involuntary context switches: how often the scheduler took its core while it ran."""


def _switches(status: str) -> tuple[int, int]:
    """Voluntary and involuntary context switches from the text of a ``status`` file."""
    counts: dict[str, int] = {}
    for line in status.splitlines():
        name, _, value = line.partition(":")
        if name.endswith("_ctxt_switches"):
            counts[name] = int(value)
    return counts["voluntary_ctxt_switches"], counts["nonvoluntary_ctxt_switches"]


def thread_times(pid: int) -> dict[tuple[str, str], ThreadTimes]:
    """Every thread of ``pid`` by ``(name, tid)``; threads that end meanwhile are left out.
    Why per thread: on a busy machine a thread's wait for a core is time a wall-clock
    profiler counts as work (``bench.cpu_split``)."""
    out: dict[tuple[str, str], ThreadTimes] = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            name = (task / "comm").read_text().strip()
            user, system = _user_system((task / "stat").read_text())
            waited = int((task / "schedstat").read_text().split()[1])
            sleeps, preemptions = _switches((task / "status").read_text())
        except OSError:
            continue
        out[name, task.name] = ThreadTimes(user, system, waited / 1e9, sleeps, preemptions)
    return out


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
