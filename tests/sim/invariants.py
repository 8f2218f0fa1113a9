"""Raft's safety properties, checked after every simulator step.

* Election Safety: at most one leader per term (seen in every Ready's soft state).
* Log Matching: two logs that agree on an (index, term) hold the same entries up to it
  (full pairwise check every ``full_check_every`` steps and at the end).
* Committed entries never change: every node's committed prefix equals the canonical
  committed log, which is fixed the first time any node commits an index.
* Leader Completeness: the log of a leader of term T holds every entry committed in a term
  below T. An entry's commit term is taken as the term of the first node seen committing it
  (never below the true one, so the check can only be weaker, never wrong); leaders are
  checked when first seen and again whenever an entry becomes canonical.
* State Machine Safety: every node's applied sequence is a prefix of the canonical one
  (hash chain).
* Idempotency: no request id appears twice in the canonical committed log.
* Monotonicity: a node's commit index never goes down while it runs; its persisted term
  never goes down, across restarts too.
"""

from __future__ import annotations

from raftlog.consensus import Ready, Role
from raftlog.entry import ZERO_REQUEST_ID, LogEntry
from sim.cluster import Observer, SimCluster, SimNode, chain


class InvariantError(AssertionError):
    pass


class Invariants:
    def __init__(self, cluster: SimCluster, full_check_every: int = 250) -> None:
        self.cluster = cluster
        self.leaders: dict[int, str] = {}
        self.canon: dict[int, LogEntry] = {}
        self.commit_term: dict[int, int] = {}
        self.canon_hash: list[bytes] = [b""]
        self.checked: dict[str, int] = {}
        self.last_commit: dict[str, int] = {}
        self.persisted_term: dict[str, int] = {}
        self.full_check_every = full_check_every
        self.leaders_checked: set[tuple[int, str]] = set()
        self.request_ids: dict[bytes, int] = {}
        cluster.observer = Observer(self.on_ready, self.on_restart)

    def fail(self, message: str) -> None:
        raise InvariantError(message)

    # -- hooks --------------------------------------------------------------------------------
    def on_ready(self, node: SimNode, ready: Ready) -> None:
        soft = ready.soft_state
        if soft is not None and soft.role is Role.LEADER:
            holder = self.leaders.setdefault(soft.term, node.id)
            if holder != node.id:
                self.fail(f"election safety: {holder} and {node.id} both lead term {soft.term}")
        hard = ready.hard_state
        if hard is not None and hard.current_term < self.persisted_term.get(node.id, 0):
            self.fail(f"{node.id} persists term {hard.current_term} after a higher one")

    def on_restart(self, node: SimNode) -> None:
        """The commit index restarts at ``last_applied``, possibly below the last one seen.
        ``checked`` is left alone: what the node committed and applied in a step it then
        crashed in was never observed (it was not live at the check), and the next check
        must still record it from the node's durable log -- skipping it left a hole in the
        canonical log (a false "applied beyond the canonical committed log") and those
        entries unchecked."""
        core = node.core
        assert core is not None
        self.checked.setdefault(node.id, 0)
        self.last_commit[node.id] = core.commit_index

    # -- per-step checks ----------------------------------------------------------------------
    def check(self, step: int) -> None:
        nodes = self.cluster.live()
        for node in nodes:
            self._check_commit(node)
        for node in nodes:
            self._check_node(node)
        if step % self.full_check_every == 0:
            self.check_log_matching()

    def _check_commit(self, node: SimNode) -> None:
        """Record newly committed entries in the canonical log (first committer wins)."""
        core = node.core
        assert core is not None
        commit = core.commit_index
        if commit < self.last_commit.get(node.id, 0):
            self.fail(f"{node.id} commit index went down to {commit}")
        self.last_commit[node.id] = commit
        low = max(self.checked.get(node.id, 0) + 1, core.first_index)
        if commit >= low:
            for offset, entry in enumerate(core.entries(low, commit + 1)):
                index = low + offset
                known = self.canon.get(index)
                if known is None:
                    self.canon[index] = entry
                    self.commit_term[index] = core.term
                    self._check_leaders_hold(index, entry, core.term)
                elif known != entry:
                    self.fail(
                        f"committed entry {index} differs: {node.id} has {entry!r}, "
                        f"canonical {known!r}"
                    )
        self.checked[node.id] = max(self.checked.get(node.id, 0), commit)
        self._extend_canon_hash()

    def _extend_canon_hash(self) -> None:
        hashes = self.canon_hash
        while True:
            index = len(hashes)
            entry = self.canon.get(index)
            if entry is None:
                return
            hashes.append(chain(hashes[-1], index, entry))
            rid = entry.request_id
            if rid != ZERO_REQUEST_ID:
                seen = self.request_ids.setdefault(rid, index)
                if seen != index:
                    self.fail(f"request id {rid.hex()} committed at {seen} and {index}")

    def _check_node(self, node: SimNode) -> None:
        core = node.core
        assert core is not None
        term = node.hard_state.load().current_term
        if term < self.persisted_term.get(node.id, 0):
            self.fail(f"{node.id} persisted term went down to {term}")
        self.persisted_term[node.id] = term
        sm = node.sm
        if sm.violations:
            self.fail(f"{node.id} state machine: {sm.violations[0]}")
        if sm.index:
            if sm.index >= len(self.canon_hash):
                self.fail(f"{node.id} applied {sm.index} beyond the canonical committed log")
            if sm.digest != self.canon_hash[sm.index]:
                self.fail(f"{node.id} applied sequence diverges from the canonical one")
        if core.role is Role.LEADER and (core.term, node.id) not in self.leaders_checked:
            self.leaders_checked.add((core.term, node.id))
            self._check_leader_completeness(node)

    def _check_leader_completeness(self, node: SimNode) -> None:
        core = node.core
        assert core is not None
        for index, entry in self.canon.items():
            if self.commit_term[index] < core.term:
                self._check_holds(node, index, entry)

    def _check_leaders_hold(self, index: int, entry: LogEntry, commit_term: int) -> None:
        for node in self.cluster.live():
            core = node.core
            assert core is not None
            if core.role is Role.LEADER and core.term > commit_term:
                self._check_holds(node, index, entry)

    def _check_holds(self, node: SimNode, index: int, entry: LogEntry) -> None:
        core = node.core
        assert core is not None
        if index < core.first_index:
            return
        if index > core.last_index or core.entries(index, index + 1)[0] != entry:
            self.fail(
                f"leader completeness: {node.id} leads term {core.term} without entry "
                f"{index} committed in term {self.commit_term[index]}"
            )

    def check_log_matching(self) -> None:
        """Pairwise: at the highest index where two logs agree on the term, the logs up to
        there (where both hold entries) must be identical."""
        logs: dict[str, tuple[int, list[LogEntry]]] = {}
        for node in self.cluster.live():
            core = node.core
            assert core is not None
            logs[node.id] = (core.first_index, core.entries(core.first_index, core.last_index + 1))
        ids = sorted(logs)
        for a_pos, a in enumerate(ids):
            for b in ids[a_pos + 1 :]:
                self._match_pair(a, logs[a], b, logs[b])

    def _match_pair(
        self, a: str, log_a: tuple[int, list[LogEntry]], b: str, log_b: tuple[int, list[LogEntry]]
    ) -> None:
        first = max(log_a[0], log_b[0])
        last = min(log_a[0] + len(log_a[1]), log_b[0] + len(log_b[1])) - 1
        agree = None
        for index in range(last, first - 1, -1):
            if log_a[1][index - log_a[0]].term == log_b[1][index - log_b[0]].term:
                agree = index
                break
        if agree is None:
            return
        for index in range(first, agree + 1):
            if log_a[1][index - log_a[0]] != log_b[1][index - log_b[0]]:
                self.fail(f"log matching: {a} and {b} agree at {agree} but differ at {index}")
