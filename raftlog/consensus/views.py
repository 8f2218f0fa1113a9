"""``CoreViews``: the read-only figures ``RaftCore`` shows its driver (issue #26).

Why apart: they are one-line windows onto ``CoreState`` that services, metrics and tests
read; keeping them here leaves ``core.py`` to the transitions.
"""

from __future__ import annotations

from raftlog.consensus.ready import Role
from raftlog.consensus.state import CoreState


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
