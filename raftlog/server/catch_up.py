"""Catch-up of a peer started outside its configuration (docs/protocol.md §12.5, CLIENT state).

Before it binds its ROUTER, a non-member peer downloads the committed log from the cluster
as an ordinary client (RequestEntries, snapshot first if the log was compacted), so that by
the time an operator adds it with ConfigUpdate it is (nearly) up to date: the joint
configuration then commits without waiting for a full transfer, and the cluster never depends
on a peer that still has gigabytes to copy.

Everything downloaded is committed (the leader serves only applied entries), so the peer
stores it, applies it to its state machines, and records it as applied; CONFIG entries on the
way are adopted (the last one becomes the hard state's configuration), and the current term
becomes at least the last entry's. Each batch is durable before the next is requested; an
interrupted catch-up simply resumes from what is stored.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable
from dataclasses import replace
from typing import Final

from raftlog.client import SyncRaftClient
from raftlog.entry import EntryType, LogEntry
from raftlog.errors import ConfigError
from raftlog.rpc.config import decode_config_payload
from raftlog.rpc.messages import SnapshotChunk
from raftlog.statemachine.composite import CompositeStateMachine
from raftlog.storage.rocks import RocksHardStateStore, RocksLogStore
from raftlog.storage.snapshot import FileSnapshotStore

BATCH: Final = 4096


class CatchUp:
    """Downloads committed entries after ``last_applied`` into the local stores."""

    def __init__(
        self,
        store: RocksLogStore,
        hard_state: RocksHardStateStore,
        snapshots: FileSnapshotStore,
        machine: CompositeStateMachine,
    ) -> None:
        self.store = store
        self.hard_state = hard_state
        self.snapshots = snapshots
        self.machine = machine
        self.entries = 0

    def run(self, seeds: Iterable[str], ident: str, timeout: float) -> int:
        """Download until the stream ends; returns the last index now stored."""
        start = self.hard_state.load().last_applied
        with SyncRaftClient(list(seeds), ident, timeout=timeout) as client:
            pending: list[LogEntry] = []
            first = start + 1
            for item in client.request_entries(start):
                if isinstance(item, SnapshotChunk):
                    first = self._snapshot_chunk(item)
                    continue
                if not pending:
                    first = item.index
                pending.append(item.entry)
                if len(pending) >= BATCH:
                    self._store(first, pending)
                    pending = []
            if pending:
                self._store(first, pending)
        return self.store.last_index

    def _snapshot_chunk(self, chunk: SnapshotChunk) -> int:
        if chunk.offset == 0:
            self.snapshots.begin(chunk.index, chunk.term, chunk.total_size)
        self.snapshots.write_chunk(chunk.offset, chunk.data)
        if chunk.offset + len(chunk.data) >= chunk.total_size:
            meta = self.snapshots.finish()
            self.store.compact(meta.index, meta.term)
            self.machine.restore(meta.index, meta.term, self.snapshots.read(0, meta.size))
            saved = self.hard_state.load()
            self.hard_state.save(
                replace(
                    saved,
                    current_term=max(saved.current_term, meta.term),
                    last_applied=meta.index,
                )
            )
        return chunk.index + 1

    def _store(self, first: int, entries: list[LogEntry]) -> None:
        """Append (durable), apply, then record config, term and progress (durable)."""
        self.store.append(first, entries)
        last = first + len(entries) - 1
        saved = self.hard_state.load()
        config, config_index = saved.config, saved.config_index
        for offset, entry in enumerate(entries):
            if entry.entry_type == EntryType.CONFIG:
                with contextlib.suppress(ConfigError):  # undecodable: kept, not adopted
                    config, config_index = decode_config_payload(entry.data), first + offset
        self.machine.apply(first, [e.to_bytes() for e in entries], entries[-1].term)
        self.hard_state.save(
            replace(
                saved,
                current_term=max(saved.current_term, entries[-1].term),
                config=config,
                config_index=config_index,
                last_applied=last,
            )
        )
        self.entries += len(entries)
