"""What a peer runs when its cluster file turns CURVE on: the ZAP thread, the per-request
guard and the reloadable policy, behind one small object the driver holds.

Why a separate object: the driver (``server/node.py``) only needs four things — start it
before binding, ask it about each inbound message, reload it on SIGHUP, stop it on close —
and a plaintext peer should carry none of it (``None`` instead of a null object keeps the
hot path of a plaintext peer to a single ``is None`` test).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import zmq

from raftlog.metrics import PeerMetrics
from raftlog.security.guard import RequestGuard
from raftlog.security.policy import PolicyHolder
from raftlog.security.settings import PeerSecurity
from raftlog.security.zap import PolicyAuthenticator


class SecurePeer:
    """The security side of one running peer."""

    def __init__(
        self,
        context: zmq.Context[Any],
        settings: PeerSecurity,
        metrics: PeerMetrics,
        *,
        owner: str,
    ) -> None:
        self.settings = settings
        self.holder = PolicyHolder(settings.load_policy())
        self.guard = RequestGuard(self.holder, metrics.access_refused, owner=owner)
        self._auth = PolicyAuthenticator(
            context, self.holder, metrics.zap_handshakes, owner=owner
        )
        self._started = False
        self.on_reload: Callable[[], None] = lambda: None
        """Called after each successful reload (the peer's quotas follow the allowlist)."""

    def start(self) -> None:
        """Start the ZAP thread; must run before any CURVE server socket binds, or libzmq
        would refuse every handshake for want of a handler."""
        self._auth.start()
        self._started = True

    def refusal(self, frames: list[bytes], user_id: str | None) -> str | None:
        """See :meth:`RequestGuard.refusal`."""
        return self.guard.refusal(frames, user_id)

    def reload(self) -> int:
        """Re-read the client allowlist (SIGHUP). Raises ConfigError and keeps the policy in
        force if the new file is bad: a typo must not lock every client out. Returns the
        number of keys now admitted."""
        policy = self.settings.load_policy()
        self.holder.replace(policy)
        self.guard.policy_reloaded()
        self.on_reload()
        return len(policy.principals)

    def close(self) -> None:
        """Stop the ZAP thread (idempotent)."""
        if self._started:
            self._started = False
            self._auth.stop()


__all__ = ["SecurePeer"]
