"""``CoreViews``: the read-only figures ``RaftCore`` shows its driver (issue #26).

Why apart: they are short windows onto ``CoreState`` (most of one line; ``connect_to`` and
``match_indexes`` derive a little) that services, metrics and tests read; keeping them here
leaves ``core.py`` to the transitions.
"""

from __future__ import annotations

from raftlog.consensus.ready import Role
from raftlog.consensus.state import CoreState
from raftlog.entry import LogEntry
from raftlog.rpc.messages import ConfigPayload, Peer


class CoreViews:
    """Read-only views of the core's state for the driver (no transitions here)."""

    _s: CoreState

    @property
    def peer_id(self) -> str:
        """This peer's id."""
        return self._s.id

    @property
    def role(self) -> Role:
        """Follower, candidate or leader."""
        return self._s.role

    @property
    def is_leader(self) -> bool:
        """Whether this peer leads (services refuse leader-only work otherwise)."""
        return self._s.role is Role.LEADER

    @property
    def term(self) -> int:
        """The current term."""
        return self._s.term

    @property
    def voted_for(self) -> str | None:
        """Whom this peer voted for in ``term`` (None: nobody yet)."""
        return self._s.voted_for

    @property
    def leader_id(self) -> str | None:
        """The leader of ``term`` as far as this peer knows (clients are redirected to it)."""
        return self._s.leader_id

    @property
    def commit_index(self) -> int:
        """The highest index known committed."""
        return self._s.commit

    @property
    def applied_index(self) -> int:
        """The highest index the state machine applied (as the driver reported)."""
        return self._s.applied

    @property
    def first_index(self) -> int:
        """The first index still in the log."""
        return self._s.log.first_index

    @property
    def last_index(self) -> int:
        """The last index in the log (durable or not)."""
        return self._s.log.last_index

    @property
    def last_term(self) -> int:
        """The term of the last entry (votes compare it, Raft §5.4.1)."""
        return self._s.log.last_term

    @property
    def config_index(self) -> int:
        """The index of the configuration in force (0: the seed configuration)."""
        return self._s.membership.index

    @property
    def config_known(self) -> bool:
        """Whether this peer knows its configuration (a fresh non-member does not)."""
        return self._s.membership.known

    def term_at(self, index: int) -> int | None:
        """Term of ``index`` in this peer's log view (including not yet durable entries)."""
        return self._s.log.term_at(index)

    def entries(self, lo: int, hi: int, max_bytes: int | None = None) -> list[LogEntry]:
        """Entries ``[lo, hi)`` of the log view (for tests and diagnostics)."""
        return list(self._s.log.entries(lo, hi, max_bytes))

    @property
    def config(self) -> ConfigPayload:
        """The configuration in effect (best guess when ``config_known`` is False); what
        RequestConfig answers with."""
        return self._s.membership.payload

    def connect_to(self) -> tuple[Peer, ...]:
        """Every peer the driver must keep a connection to: the configuration in effect plus
        the peers this leader is still telling about their removal (see ``leader``)."""
        peers = self._s.membership.payload.all_peers()
        known = {peer.id for peer in peers}
        departing = tuple(p for p in self._s.departing.values() if p.id not in known)
        return peers + departing

    @property
    def removed(self) -> bool:
        """Has a committed configuration removed this former voter (``RemovedFromCluster``)?"""
        return self._s.removed_reported

    def match_indexes(self) -> dict[str, int]:
        """On a leader: each other peer's highest index known replicated (its progress);
        empty elsewhere. A copy, for monitoring (``raftlog.observability``)."""
        if self._s.role is not Role.LEADER:
            return {}
        return {peer: p.match for peer, p in self._s.progress.items()}

    @property
    def pending_config_change(self) -> int | None:
        """Joint index of the ConfigUpdate this leader started and has not completed."""
        change = self._s.pending_change
        return None if change is None else change[1]
