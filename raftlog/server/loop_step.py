"""One pass of a peer's loop: the order in which inputs, time and Readies meet the core.

Run by the peer (``PeerNode.run``, over its sockets and the monotonic clock), by the
deterministic simulator (``tests/sim/cluster.py``, over its fake network and tick counter)
and by the catch-up of a non-member peer (``CatchUp``, whose inputs are the committed batches
a leader streams). Why one function: the order of the phases is what the simulated seeds
check; a simulator that re-created it by hand could pass while the peer ran another order.
A structure test (``tests/unit/test_structure.py``) keeps the three on this function.

The phases, in order:

1. ``inputs.drain_inputs()``: step everything that arrived into the core (the peer: peer
   sockets first, then its ROUTER within a budget) -- so everything that queued up while the
   previous fsync ran is proposed together and written by the next single fsync;
2. tick the core for the whole ticks that passed (``inputs.ticks_due``), at most
   ``MAX_TICK_BACKLOG`` after a stall, *after* the drain: a peer that was stopped for a while
   first hears that the cluster moved on before its own election timer fires;
3. on a pass that ticked, the driver's timers (``inputs.on_ticked``);
4. carry out the core's Readies with the ``ReadyExecutor`` -- holding new Readies back while
   a write is in flight, except on passes that ticked, when ``hold_while_writing`` is asked
   (heartbeats and votes must not wait for a slow disk);
5. ``inputs.after_readies()``: the work that gets what is left of the pass (the peer's
   RequestEntries streaming; batches are never sent from a message handler).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final, NamedTuple, Protocol

from raftlog.server.ready_executor import ReadyExecutor

MAX_TICK_BACKLOG: Final = 100
"""Ticks replayed at most after a stall (e.g. a very slow fsync); the rest are skipped."""


class StepInputs(Protocol):
    """What a loop step drives besides the core: the driver's inputs, clock and timers."""

    def drain_inputs(self) -> None:
        """Phase 1: step into the core everything that arrived since the last pass."""
        ...

    def ticks_due(self, now: float) -> int:
        """Phase 2: whole ticks that passed by ``now`` (0: none); the driver advances its
        own next-tick deadline."""
        ...

    def on_ticked(self, now: float) -> None:
        """Phase 3: the driver's timers, on a pass whose clock ticked."""
        ...

    def after_readies(self, now: float) -> None:
        """Phase 5: what gets the rest of the pass once the Readies are carried out."""
        ...


class Ticking(Protocol):
    """The core's clock input (``RaftCore`` satisfies it)."""

    def tick(self, n: int = 1) -> None:
        """``n`` ticks of time passed."""
        ...


class StepTimes(NamedTuple):
    """When each phase of a pass ended, by the step's clock (the peer's stall meter splits
    a long pass into them)."""

    drained: float
    readied: float
    streamed: float


def loop_step(
    core: Ticking | None,
    executor: ReadyExecutor,
    inputs: StepInputs,
    clock: Callable[[], float],
    *,
    hold_while_writing: bool,
) -> StepTimes:
    """One pass of the loop (the module docstring has the phases and why this order).

    ``core`` None: the Readies do not come from a ticking core (a catch-up), so no time
    is stepped. ``clock`` is the driver's: ``time.monotonic`` for a peer, the simulated
    tick counter for the simulator."""
    inputs.drain_inputs()
    now = drained = clock()
    ticks = inputs.ticks_due(now)
    if ticks and core is not None:
        core.tick(min(ticks, MAX_TICK_BACKLOG))
        inputs.on_ticked(now)
    readied = clock()
    executor.drain(hold_while_writing=hold_while_writing and not ticks)
    streamed = clock()
    inputs.after_readies(streamed)
    return StepTimes(drained, readied, streamed)
