"""One loop step for the peer, the catch-up and the simulator (issue #26).

``raftlog.server.loop_step.loop_step`` holds the order in which inputs, time and Readies meet
the core. The structure checks fail if a driver stops calling it or orders a phase by hand
(ticks the core, takes or carries out Readies itself): then the simulated seeds would check
an order the peer no longer runs. The behaviour checks pin the order itself with fakes.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from raftlog.server.loop_step import MAX_TICK_BACKLOG, loop_step

ROOT = Path(__file__).resolve().parents[2]
DRIVERS = {
    "peer": ROOT / "raftlog/server/node.py",
    "catch-up": ROOT / "raftlog/server/catch_up.py",
    "simulator": ROOT / "tests/sim/cluster.py",
}
PHASE_CALLS = frozenset({"tick", "ready", "execute", "collect"})
"""Methods only ``loop_step`` (and the executor it calls) may call on a core or executor."""


def loop_step_calls(tree: ast.AST) -> int:
    """Calls of ``loop_step`` imported from ``raftlog.server.loop_step``."""
    imported = any(
        isinstance(node, ast.ImportFrom)
        and node.module == "raftlog.server.loop_step"
        and any(alias.name == "loop_step" for alias in node.names)
        for node in ast.walk(tree)
    )
    if not imported:
        return 0
    return sum(
        1
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "loop_step"
    )


def hand_ordered_phases(tree: ast.AST) -> list[str]:
    """Phase calls a driver makes itself: ``x.tick(...)``, ``x.ready()``, ``x.execute(...)``,
    ``x.collect()``, and ``x.drain(hold_while_writing=...)`` (the executor's drain)."""
    found = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        name = node.func.attr
        if name in PHASE_CALLS or (
            name == "drain" and any(k.arg == "hold_while_writing" for k in node.keywords)
        ):
            found.append(f"{name} (line {node.lineno})")
    return found


def test_the_checkers_see_a_driver_that_orders_the_phases_itself() -> None:
    hand_made = ast.parse(
        "def step(core, executor):\n"
        "    core.tick()\n"
        "    executor.drain(hold_while_writing=False)\n"
    )
    assert loop_step_calls(hand_made) == 0
    assert hand_ordered_phases(hand_made) == ["tick (line 2)", "drain (line 3)"]


@pytest.mark.parametrize("driver", sorted(DRIVERS))
def test_every_driver_runs_the_one_loop_step(driver: str) -> None:
    tree = ast.parse(DRIVERS[driver].read_text(encoding="utf-8"))
    assert loop_step_calls(tree) >= 1, f"the {driver} no longer runs loop_step"
    assert hand_ordered_phases(tree) == [], f"the {driver} orders loop phases by hand"


class Recorder:
    """Core, executor and inputs in one: records the calls ``loop_step`` makes, in order."""

    def __init__(self, ticks: int) -> None:
        self.calls: list[object] = []
        self._ticks = ticks

    def tick(self, n: int = 1) -> None:
        self.calls.append(("tick", n))

    def drain(self, *, hold_while_writing: bool = False) -> None:
        self.calls.append(("readies", hold_while_writing))

    def drain_inputs(self) -> None:
        self.calls.append("inputs")

    def ticks_due(self, now: float) -> int:
        return self._ticks

    def on_ticked(self, now: float) -> None:
        self.calls.append("timers")

    def after_readies(self, now: float) -> None:
        self.calls.append("after")


def test_a_pass_drains_then_ticks_then_runs_timers_then_readies_then_the_rest() -> None:
    rec = Recorder(ticks=3)
    loop_step(rec, rec, rec, lambda: 1.0, hold_while_writing=True)  # type: ignore[arg-type]
    assert rec.calls == ["inputs", ("tick", 3), "timers", ("readies", False), "after"]


def test_a_pass_without_a_tick_holds_readies_while_writing_when_asked() -> None:
    rec = Recorder(ticks=0)
    loop_step(rec, rec, rec, lambda: 1.0, hold_while_writing=True)  # type: ignore[arg-type]
    assert rec.calls == ["inputs", ("readies", True), "after"]


def test_a_long_stall_replays_at_most_the_tick_backlog() -> None:
    rec = Recorder(ticks=MAX_TICK_BACKLOG * 5)
    loop_step(rec, rec, rec, lambda: 1.0, hold_while_writing=False)  # type: ignore[arg-type]
    assert ("tick", MAX_TICK_BACKLOG) in rec.calls
