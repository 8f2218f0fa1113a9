"""Catch-up of a peer started outside its configuration (docs/protocol.md §12.5, CLIENT state).

Before it binds its ROUTER, a non-member peer downloads the committed log from the cluster
as an ordinary client (RequestEntries, snapshot first if the log was compacted), so that by
the time an operator adds it with ConfigUpdate it is (nearly) up to date: the joint
configuration then commits without waiting for a full transfer, and the cluster never depends
on a peer that still has gigabytes to copy.

Everything downloaded is committed (the leader serves only applied entries), so each batch
becomes a Ready, and the stream plays the core's part in the peer's own loop step
(``raftlog.server.loop_step``), whose ``ReadyExecutor`` carries each out like any other: the
hard state (CONFIG entries on the way adopted -- the last one becomes its configuration --
and the term at least the last entry's) and the entries in one synced write, then the state
machines apply them and the progress is recorded. Each batch is durable before the next is
requested; an interrupted catch-up simply resumes from what is stored (at worst
re-downloading the last batch, whose applied index rides on the next synced write).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import replace
from typing import Final

from raftlog.client import StreamItem, SyncRaftClient
from raftlog.config import PeerSettings
from raftlog.consensus import (
    CommittedEntries,
    LogAppend,
    Ready,
    SnapshotChunkWrite,
    SnapshotInstall,
    SnapshotOp,
)
from raftlog.entry import EntryType, LogEntry
from raftlog.errors import ClusterUnavailableError, ConfigError, LocalProtocolError
from raftlog.rpc.config import decode_config_payload
from raftlog.rpc.messages import Peer, PeerRequest, PeerResponse, SnapshotChunk
from raftlog.security.settings import CurveClient
from raftlog.server.interfaces import EventLog
from raftlog.server.loop_step import loop_step
from raftlog.server.ready_executor import AppliedMachine, ReadyExecutor
from raftlog.storage.base import HardStateStore, LogStore, ReadyStore, SnapshotStore

BATCH: Final = 4096


class _NoPeerMessages:
    """The catch-up's ``Outbox``: its Readies carry no peer messages (it is a client of the
    cluster, not yet a peer), so any message here is a bug worth stopping for."""

    def connect(self, peers: Sequence[Peer]) -> None:
        """CONFIG entries on the way are adopted into the hard state; nothing to connect."""

    def send_request(self, to: str, message: PeerRequest) -> None:
        raise LocalProtocolError(f"catch-up cannot send {type(message).__name__} to {to}")

    def send_reply(self, token: object, message: PeerResponse) -> None:
        raise LocalProtocolError(f"catch-up cannot answer with {type(message).__name__}")


class _NoInputs:
    """The catch-up's ``StepInputs``: nothing arrives but the stream (the core's part), no
    time is stepped, no timers run, nothing streams out."""

    def drain_inputs(self) -> None:
        """The stream is pulled by the executor, one Ready at a time."""

    def ticks_due(self, now: float) -> int:
        """No core ticks during a catch-up."""
        return 0

    def on_ticked(self, now: float) -> None:
        """Never called: no tick is ever due."""

    def after_readies(self, now: float) -> None:
        """Nothing to stream out."""


class _CommittedStream:
    """The core's part (``ReadyCore``) in the catch-up's loop step: hands out the Readies
    the leader's committed stream becomes, one at a time, each built only after the previous
    one was carried out (it reads the hard state that one wrote). Nothing it hands out is
    new to the cluster, so being told it was dispatched, persisted or applied needs nothing."""

    def __init__(self, readies: Iterator[Ready]) -> None:
        self._readies = readies
        self._next: Ready | None = None
        self.term = 0
        """The term the state machine applies with: the last entry's of the batch."""

    def has_ready(self) -> bool:
        """Whether the stream has another batch (pulls it from the leader if needed)."""
        if self._next is None:
            self._next = next(self._readies, None)
        return self._next is not None

    def ready(self) -> Ready:
        """The next batch as a Ready."""
        ready, self._next = self._next, None
        if ready is None:
            raise LocalProtocolError("catch-up: no Ready pending")
        if ready.committed is not None:
            self.term = ready.committed.entries[-1].term
        return ready

    def applied(self, index: int) -> None:
        """The leader applied it long ago: nothing to tell."""

    def dispatched(self, ready: Ready) -> None:
        """Its entries are committed already: nothing to advance."""

    def persisted(self, ready: Ready) -> None:
        """Its entries are committed already: nothing to count."""

    def connect_to(self) -> tuple[Peer, ...]:
        """A catch-up talks to no peer."""
        return ()


class CatchUp:
    """Downloads committed entries after ``last_applied`` into the local stores, carrying
    each batch out as a Ready (hard state + entries in one synced write, then apply) with the
    peer's ``ReadyExecutor``."""

    def __init__(
        self,
        store: LogStore,
        hard_state: HardStateStore,
        snapshots: SnapshotStore,
        machine: AppliedMachine,
        ready_store: ReadyStore,
    ) -> None:
        self.store = store
        self.hard_state = hard_state
        self.entries = 0
        self._executor = ReadyExecutor(
            log=store,
            hard_state=hard_state,
            snapshots=snapshots,
            ready_store=ready_store,
            machine=machine,
            outbox=_NoPeerMessages(),
        )

    def run(
        self,
        seeds: Iterable[str],
        ident: str,
        timeout: float,
        curve: CurveClient | None = None,
    ) -> int:
        """Download until the stream ends; returns the last index now stored."""
        start = self.hard_state.load().last_applied
        with SyncRaftClient(list(seeds), ident, timeout=timeout, curve=curve) as client:
            self.store_stream(start, client.request_entries(start))
        return self.store.last_index

    def run_for_peer(self, settings: PeerSettings, log: EventLog) -> None:
        """``run`` from the peer's settings, logged; a cluster that cannot be reached ends
        the catch-up early (the peer then serves what it has: it is not a member yet)."""
        seeds = [p.url for p in settings.peers]
        log.info("catch_up_started", seeds=seeds, last_index=self.store.last_index)
        try:
            last = self.run(
                seeds,
                settings.ident,
                settings.options.catch_up_timeout / 1000,
                curve=settings.security.client if settings.security else None,
            )
            log.info("catch_up_done", last_index=last, entries=self.entries)
        except ClusterUnavailableError as exc:
            log.warning("catch_up_incomplete", reason=str(exc), entries=self.entries)

    def store_stream(self, start: int, items: Iterable[StreamItem]) -> None:
        """Store what a RequestEntries stream after ``start`` yields, batch by batch: one
        loop step whose core is the stream, run until the stream ends."""
        stream = _CommittedStream(self._readies(start, items))
        self._executor.core = stream
        try:
            loop_step(None, self._executor, _NoInputs(), time.monotonic, hold_while_writing=False)
        finally:
            self._executor.core = None
            self._executor.flush_applied()
        if stream.has_ready():  # no crash points here: cannot happen
            raise LocalProtocolError("catch-up Ready interrupted")

    def _readies(self, start: int, items: Iterable[StreamItem]) -> Iterator[Ready]:
        """The stream's items as Readies: snapshot chunks one each, entries ``BATCH`` at a
        time (each counted once it was carried out)."""
        pending: list[LogEntry] = []
        first = start + 1
        for item in items:
            if isinstance(item, SnapshotChunk):
                yield self._snapshot_chunk(item)
                first = item.index + 1
                continue
            if not pending:
                first = item.index
            pending.append(item.entry)
            if len(pending) >= BATCH:
                yield self._batch(first, pending)
                self.entries += len(pending)
                pending = []
        if pending:
            yield self._batch(first, pending)
            self.entries += len(pending)

    def _snapshot_chunk(self, chunk: SnapshotChunk) -> Ready:
        """One chunk as a Ready; the last one installs the snapshot and restores from it."""
        ops: list[SnapshotOp] = [
            SnapshotChunkWrite(chunk.index, chunk.term, chunk.total_size, chunk.offset, chunk.data)
        ]
        hard_state = None
        if chunk.offset + len(chunk.data) >= chunk.total_size:
            ops.append(SnapshotInstall(chunk.index, chunk.term, finish_receive=True))
            saved = self.hard_state.load()
            hard_state = replace(saved, current_term=max(saved.current_term, chunk.term))
        return Ready(None, hard_state, tuple(ops), None, (), (), None, ())

    def _batch(self, first: int, entries: list[LogEntry]) -> Ready:
        """Entries, config and term in one synced batch; then apply (progress recorded)."""
        saved = self.hard_state.load()
        config, config_index = saved.config, saved.config_index
        for offset, entry in enumerate(entries):
            if entry.entry_type == EntryType.CONFIG:
                with contextlib.suppress(ConfigError):  # undecodable: kept, not adopted
                    config, config_index = decode_config_payload(entry.data), first + offset
        hard_state = replace(
            saved,
            current_term=max(saved.current_term, entries[-1].term),
            config=config,
            config_index=config_index,
        )
        batch = tuple(entries)
        append, committed = LogAppend(first, batch), CommittedEntries(first, batch)
        return Ready(None, hard_state, (), append, (), (), committed, ())
