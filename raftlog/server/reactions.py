"""What the peer does about a Ready's role change and events (the executor's ``react``).

Why a module of its own: the reactions touch the services (fail pending clients, drop
RequestEntries streams, cancel peer requests), the observer and the logs -- none of it is the
loop's business, and ``PeerNode`` stays the thin driver of ``loop_step``. The executor calls
``react`` after a Ready's committed entries are applied (step 6 of ``ReadyExecutor``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from raftlog.consensus import (
    BadConfigEntry,
    ConfigChangeCompleted,
    ConfigChanged,
    Event,
    Ready,
    Role,
    SnapshotInstall,
    SoftState,
    SteppedDown,
    TruncationRefused,
)
from raftlog.metrics import PeerMetrics
from raftlog.observability.peer_hook import PeerObserver
from raftlog.server.client_service import ClientService
from raftlog.server.entries_service import EntriesService
from raftlog.server.interfaces import EventLog
from raftlog.server.loop_health import react_to_guard_event
from raftlog.server.peers import PeerChannels
from raftlog.statemachine.composite import CompositeStateMachine
from raftlog.storage.base import LogStore


class PeerReactions:
    """The peer's ``react``: remembers whether it led, so a lost leadership is noticed once."""

    def __init__(
        self,
        *,
        observer: PeerObserver,
        clients: ClientService,
        entries: EntriesService,
        channels: PeerChannels,
        machine: CompositeStateMachine,
        store: LogStore,
        metrics: PeerMetrics,
        log: EventLog,
        exit_when_removed: bool,
        stop: Callable[[], None],
        on_read_event: Callable[[Event], bool] = lambda event: False,
    ) -> None:
        self._observer = observer
        self._clients = clients
        self._entries = entries
        self._channels = channels
        self._machine = machine
        self._store = store
        self._metrics = metrics
        self._log = log
        self._exit_when_removed = exit_when_removed
        self._stop = stop
        self._on_read_event = on_read_event
        """ReadIndex answers and failures go to the waiting reads (issue #29); True: taken."""
        self._was_leader = False

    def __call__(self, ready: Ready) -> None:
        """React to ``ready``'s soft state, snapshot installs and events, in that order."""
        if ready.soft_state is not None:
            self._role(ready.soft_state)
        for op in ready.snapshot_ops:
            if isinstance(op, SnapshotInstall):
                self._log.info("snapshot_installed", index=op.index, term=op.term)
        for event in ready.events:
            self._event(event)

    def _role(self, soft: SoftState) -> None:
        """A lost leadership fails what only a leader could finish; the machines learn the
        role (the broadcast machine publishes only on the leader)."""
        is_leader = soft.role is Role.LEADER
        self._observer.on_soft_state(soft, self._was_leader)
        if self._was_leader and not is_leader:
            self._clients.fail_all(soft.leader_id)
            self._entries.drop_all()
            self._channels.cancel_all()
        self._machine.set_leader(is_leader, soft.term)
        if is_leader and not self._was_leader:
            self._log.info("became_leader", term=soft.term, last_index=self._store.last_index)
        elif not is_leader:
            self._log.info(
                "role_changed", role=soft.role.value, term=soft.term, leader=soft.leader_id
            )
        self._was_leader = is_leader

    def _event(self, event: Any) -> None:
        """One core event: logged, counted, and a finished config change answered."""
        log = self._log
        if isinstance(event, ConfigChangeCompleted):
            self._clients.on_config_completed(event.joint_index)
            log.info("config_change_completed", joint_index=event.joint_index)
        elif isinstance(event, ConfigChanged):
            log.info(
                "config_changed",
                index=event.index,
                joint=event.config.is_joint,
                peers=[p.id for p in event.config.all_peers()],
            )
        elif isinstance(event, SteppedDown):
            log.info("stepped_down", term=event.term, reason=event.reason)
            self._observer.on_stepped_down(event.term, event.reason)
        elif isinstance(event, TruncationRefused):
            self._metrics.truncations_refused.inc()
            log.error("truncation_refused", **_fields(event))
        elif isinstance(event, BadConfigEntry):
            log.error("bad_config_entry", index=event.index, reason=event.reason)
        elif not self._on_read_event(event):
            react_to_guard_event(
                event,
                metrics=self._metrics,
                log=log,
                exit_when_removed=self._exit_when_removed,
                stop=self._stop,
            )


def _fields(event: Any) -> dict[str, Any]:
    return {name: getattr(event, name) for name in event.__slots__}
