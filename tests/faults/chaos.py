"""``make chaos``: the fault schedules, long and with many seeds, and a table of the results.

Environment (all optional):

* ``RAFTLOG_CHAOS_MINUTES``   total budget (default 10); rounds of all schedules (a new seed
  per round) run until it is spent (a started run finishes);
* ``RAFTLOG_CHAOS_SECONDS``   fault phase of one run (default 30);
* ``RAFTLOG_CHAOS_SEED``      first seed (default: from the clock, printed);
* ``RAFTLOG_CHAOS_SCHEDULES`` comma-separated subset of schedule names;
* ``RAFTLOG_CHAOS_DOC``       file whose chaos table is replaced (default docs/reliability.md;
  ``-`` prints only);
* ``RAFTLOG_CHAOS_TABLE``     which table of that file (default ``chaos-table``; ``make
  chaos-power`` runs only the power-cut schedules into ``power-table``).

Every run keeps its artifacts (history.jsonl, report.txt, peer logs) under
``$TMPDIR/raftlog-chaos/<start time>/<schedule>-<seed>``; failing runs are listed with their
seed so that ``RAFTLOG_CHAOS_SEED=<seed> RAFTLOG_CHAOS_SCHEDULES=<name> make chaos`` replays
them. Exit status 1 if any run broke a promise or missed its guards.
"""

from __future__ import annotations

import faulthandler
import os
import platform
import sys
import tempfile
import time
import traceback
from collections import defaultdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from faults.clock_schedules import time_problems
from faults.harness import RunResult, run_schedule
from faults.schedules import SCHEDULES, unmet_guards

COLUMNS = (
    "schedule",
    "runs",
    "seconds",
    "acked",
    "lost",
    "duplicated",
    "expired_early",
    "divergent",
    "other",
    "elections",
    "max_unavail_s",
    "power_cuts",
    "coordinated_cuts",
    "failed",
)


def machine() -> str:
    cpus = os.cpu_count()
    model = "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{platform.node()}: {cpus} cores ({model}), Python {platform.python_version()}"


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def load_note() -> str:
    """What the load before a run says about the machine, from the figure itself (never a
    fixed claim): above one runnable task per core, other work was competing."""
    one_minute = os.getloadavg()[0]
    cores = os.cpu_count() or 1
    if one_minute > cores:
        return f"**busy machine: 1-min load {one_minute:.1f} on {cores} cores before the run**"
    return f"quiet machine before the run (1-min load {one_minute:.1f} on {cores} cores)"


def table(rows: dict[str, list[dict[str, Any]]], failures: dict[str, list[str]]) -> str:
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    for name, runs in rows.items():
        agg = {
            "schedule": name,
            "runs": len(runs),
            "seconds": sum(r["seconds"] for r in runs),
            "failed": len(failures.get(name, [])),
        }
        summed = ("acked", "lost", "duplicated", "divergent", "other", "elections")
        for col in (*summed, "expired_early", "power_cuts", "coordinated_cuts"):
            agg[col] = sum(r.get(col, 0) for r in runs)
        agg["max_unavail_s"] = max((r["max_unavail_s"] for r in runs), default=0)
        lines.append("| " + " | ".join(str(agg[c]) for c in COLUMNS) + " |")
    return "\n".join(lines)


def write_doc(doc: Path, text: str, marker: str = "chaos-table") -> None:
    """Replace the block between ``<!-- marker:start -->`` and ``<!-- marker:end -->``."""
    start, end = f"<!-- {marker}:start -->", f"<!-- {marker}:end -->"
    current = doc.read_text() if doc.exists() else ""
    block = f"{start}\n{text}\n{end}"
    if start in current and end in current:
        head, rest = current.split(start, 1)
        current = head + block + rest.split(end, 1)[1]
    else:
        current += f"\n{block}\n"
    doc.write_text(current)


def main() -> int:
    faulthandler.enable()  # a native abort (libzmq's assertions) prints every thread's stack
    minutes = float(os.environ.get("RAFTLOG_CHAOS_MINUTES", "10"))
    seconds = float(os.environ.get("RAFTLOG_CHAOS_SECONDS", "30"))
    seed = int(os.environ.get("RAFTLOG_CHAOS_SEED", str(int(time.time()) % 100_000)))
    names = [n for n in os.environ.get("RAFTLOG_CHAOS_SCHEDULES", "").split(",") if n]
    names = names or list(SCHEDULES)
    unknown = set(names) - set(SCHEDULES)
    if unknown:
        print(f"unknown schedules {sorted(unknown)}; known: {list(SCHEDULES)}", file=sys.stderr)
        return 2
    root = Path(tempfile.gettempdir(), "raftlog-chaos", datetime.now(UTC).strftime("%Y%m%dT%H%M%S"))
    started_at = datetime.now(UTC)
    load_before = load()
    print(f"chaos: {minutes} min, {seconds} s per run, first seed {seed}, artifacts in {root}")
    deadline = time.monotonic() + minutes * 60
    rows: dict[str, list[dict[str, Any]]] = defaultdict(list)
    failures: dict[str, list[str]] = defaultdict(list)
    round_no = 0
    while time.monotonic() < deadline:
        for name in names:
            if time.monotonic() >= deadline:
                break
            run_seed = seed + round_no
            schedule = SCHEDULES[name]
            options = schedule.run_options(seconds)
            directory = root / f"{name}-{run_seed}"
            try:
                result: RunResult = run_schedule(name, schedule.fault, directory, run_seed, options)
            except pytest.skip.Exception as skipped:
                print(f"  {name}: skipped ({skipped})")
                continue
            except Exception:
                failures[name].append(f"seed {run_seed}: harness error (see {directory})")
                (directory / "error.txt").write_text(traceback.format_exc())
                print(f"  {name} seed={run_seed}: ERROR\n{traceback.format_exc()}")
                continue
            rows[name].append(
                {
                    **result.row(),
                    "power_cuts": result.did.get("power_cuts", 0),
                    "coordinated_cuts": result.did.get("coordinated_cuts", 0),
                }
            )
            problems = unmet_guards(schedule, result.did) + time_problems(result.did)
            if not result.report.valid or problems:
                failures[name].append(f"seed {run_seed}: {result.report.summary()} {problems}")
            print(f"  {result.row()} did={result.did}", flush=True)
        round_no += 1
    chosen = os.environ.get("RAFTLOG_CHAOS_SCHEDULES", "")
    subset = f" RAFTLOG_CHAOS_SCHEDULES={chosen}" if chosen else ""
    text = (
        f"Run {started_at:%Y-%m-%d %H:%M} UTC on {machine()}; load average before "
        f"{load_before}, after {load()}. Command: `RAFTLOG_CHAOS_MINUTES={minutes:g} "
        f"RAFTLOG_CHAOS_SECONDS={seconds:g}{subset} make chaos`, "
        f"seeds {seed}..{seed + round_no - 1}.\n\n"
        + table(rows, failures)
    )
    if failures:
        text += "\n\nFailed runs:\n\n" + "\n".join(
            f"- {name} {msg.splitlines()[0]}" for name, msgs in failures.items() for msg in msgs
        )
    print(text)
    doc = os.environ.get("RAFTLOG_CHAOS_DOC", "docs/reliability.md")
    if doc != "-":
        write_doc(Path(doc), text, os.environ.get("RAFTLOG_CHAOS_TABLE", "chaos-table"))
        print(f"table written to {doc}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
