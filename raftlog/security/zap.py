"""The ZAP handler: decides, once per connection handshake, whether a CURVE key may connect.

Why pyzmq's ``ThreadAuthenticator``: ZAP (ZeroMQ RFC 27) is a request/reply protocol on an
inproc socket that libzmq calls during every CURVE handshake; pyzmq ships a maintained
implementation running in its own thread, so a slow lookup never stalls the consensus loop.
We only give it the decision (the current :class:`~raftlog.security.policy.PolicyHolder`)
and make its outcome visible: one ``zap_refused`` log event per refused connection (ZAP is
asked once per connection, not per message) and a counter an exporter can read.

The User-Id ZAP returns for an accepted key is the key itself (z85), so the peer can map
every message it later receives on that connection back to a principal (``User-Id``
message property) and re-check it against the policy in force at that moment.
"""

from __future__ import annotations

from typing import Any

import structlog
import zmq
from zmq.auth.thread import ThreadAuthenticator

from raftlog.metrics import Counter
from raftlog.security.policy import PolicyHolder
from raftlog.sockets import ZAP_DOMAIN, ZAP_DOMAIN_BROADCAST

log = structlog.get_logger("raftlog.security")


class PolicyAuthenticator(ThreadAuthenticator):
    """A ZAP thread that admits exactly the keys of the policy in force."""

    def __init__(
        self, context: zmq.Context[Any], holder: PolicyHolder, handshakes: Counter, *, owner: str
    ) -> None:
        super().__init__(context=context)
        self._holder = holder
        self._owner = owner
        self._address = ""
        self._accepted = handshakes.labels(result="accepted")
        self._refused = handshakes.labels(result="refused")

    def start(self) -> None:
        """Start the ZAP thread and route every CURVE handshake of our domain through it."""
        super().start()
        self.configure_curve_callback(ZAP_DOMAIN.decode(), credentials_provider=self)
        self.configure_curve_callback(ZAP_DOMAIN_BROADCAST.decode(), credentials_provider=self)

    async def handle_zap_message(self, msg: list[bytes]) -> None:
        """Remember the peer address of this request for the refusal event, then decide."""
        # the callback below runs next, in this same ZAP thread: no lock needed
        self._address = msg[3].decode("utf-8", "replace") if len(msg) > 3 else "?"
        await super().handle_zap_message(msg)

    def callback(self, domain: str, key: bytes) -> bool:
        """``zmq.auth`` credentials-provider hook: may ``key`` (z85) connect to a socket of
        ``domain`` (the ROUTER's, or the broadcast's)?"""
        principal = self._holder.current.principal(key)
        allowed = principal is not None
        reason = "key not in the allowlist"
        if principal is not None and domain == ZAP_DOMAIN_BROADCAST.decode():
            # the broadcast carries every topic: not for a key limited to some of them
            allowed = principal.peer_id is not None or principal.read.unrestricted
            reason = "key may read only some topics, not the broadcast"
        if allowed:
            self._accepted.inc()
        else:
            self._refused.inc()
            log.warning(
                "zap_refused",
                peer=self._owner,
                client_key=key.decode("ascii", "replace"),
                address=self._address,
                domain=domain,
                reason=reason,
            )
        return allowed
