"""Run every benchmark suite and write BENCHMARKS.md.

Each module ``bench/bench_<name>.py`` exposes ``run() -> str``, returning a Markdown section
(its own heading, a table with medians of several runs, and ratios taken within the same run).
``python -m bench name ...`` runs only the named suites; every section is kept in
``bench/results/<name>.md`` (with its own date line) so a partial run refreshes only its
part. Each section records the machine, the command and the date, as DEVELOPERS.md asks.
"""

from __future__ import annotations

import datetime as _dt
import importlib
import os
import pkgutil
import platform
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    mem = ""
    try:
        pages = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        mem = f", {pages / 2**30:.0f} GiB RAM"
    except (ValueError, OSError):
        pass
    system = f"{platform.system()} {platform.release()}"
    return f"{cpu}, {os.cpu_count()} cores{mem}, {system}{_idle_policy()}, {_interpreter()}"


def _interpreter() -> str:
    """Which CPython ran the peers, and where it was installed: two builds of Python 3.11
    differ by more than many changes measured here (Debian's packaged 3.11 ran the three
    peers with 0.93x the CPU of a default source build of pyenv's, docs/performance.md
    section 1), so the figures of two builds are not comparable either."""
    return f"Python {platform.python_version()} ({sys.base_prefix}, {platform.python_compiler()})"


def _idle_policy() -> str:
    """How an idle CPU waits, where the kernel says: on a VM that halts an idle vCPU at once,
    waking it is ~0.2 ms of the p50 at one update in flight (docs/performance.md section 2),
    so the figures of two machines differing only here are not comparable."""
    cpuidle = Path("/sys/devices/system/cpu/cpuidle/current_driver")
    poll = Path("/sys/module/haltpoll/parameters/guest_halt_poll_ns")
    try:
        driver = cpuidle.read_text(encoding="utf-8").strip()
    except OSError:
        return ""
    try:
        return f", cpuidle {driver} (guest_halt_poll_ns {poll.read_text(encoding='utf-8').strip()})"
    except OSError:
        return f", cpuidle {driver}"


def main(argv: list[str]) -> int:
    wanted = set(argv)
    modules = pkgutil.iter_modules([str(Path(__file__).parent)])
    names = sorted(m.name for m in modules if m.name.startswith("bench_"))
    results = Path(__file__).parent / "results"
    results.mkdir(exist_ok=True)
    stamp = _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    for name in names:
        short = name.removeprefix("bench_")
        if wanted and short not in wanted:
            continue
        print(f"== running bench {short}", flush=True)
        module = importlib.import_module(f"bench.{name}")
        section = module.run().rstrip() + "\n"
        meta = f"\n_Run {stamp} on {_machine()}; command `make bench BENCH={short}`._\n"
        (results / f"{short}.md").write_text(section + meta, encoding="utf-8")
    sections = [p.read_text(encoding="utf-8") for p in sorted(results.glob("*.md"))]
    header = (
        "# raftlog benchmarks\n\n"
        "Produced by `make bench` (all suites) or `make bench BENCH=name` (one suite); each\n"
        "section records its own date, machine and command. Figures are medians of several runs;\n"
        "ratios compare runs made in the same invocation on the same machine.\n\n"
    )
    out = ROOT / "BENCHMARKS.md"
    out.write_text(header + "\n".join(sections), encoding="utf-8")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
