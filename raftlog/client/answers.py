"""How the client reads the answers to updates: pure functions from a response to an outcome.

Kept apart from :class:`~raftlog.client.client.RaftClient` so the rules -- which status is
final, which means "wait", which means "ask the leader it names" -- read in one place and
are tested without sockets. An outcome is ``Done(value)``, ``WAIT`` or ``Redirect(leader)``
(see :mod:`raftlog.client.routing`); a refusal raises.
"""

from __future__ import annotations

from raftlog.client.routing import WAIT, Done, Outcome, Redirect
from raftlog.errors import ConfigUpdateError, RemoteProtocolError, RequestExpiredError
from raftlog.rpc.messages import (
    ConfigUpdateResponse,
    ConfigUpdateStatus,
    RequestUpdateResponse,
    Response,
    UpdateStatus,
)


def unexpected(resp: Response) -> RemoteProtocolError:
    """The error for an answer of the wrong message type."""
    return RemoteProtocolError(f"unexpected response {type(resp).__name__}")


def update_outcome(request_id: bytes, resp: Response, url: str) -> Outcome[int]:
    """RequestUpdate (§10.3): done with its index, accepted (wait), not leader, or expired."""
    if not isinstance(resp, RequestUpdateResponse):
        raise unexpected(resp)
    if resp.status is UpdateStatus.DONE and resp.index is not None:
        return Done(resp.index)
    if resp.status is UpdateStatus.ACCEPTED:
        return WAIT
    if resp.status is UpdateStatus.NOT_LEADER:
        return Redirect(resp.leader_id)
    raise RequestExpiredError(f"request id {request_id.hex()} rejected as expired by the leader")


def config_update_outcome(request_id: bytes, resp: Response, url: str) -> Outcome[int]:
    """ConfigUpdate (§10.4): status 1 with the joint index (or without: wait), not leader,
    2 refused (``ConfigUpdateError``), 3 busy (refused at once: waiting could apply this
    change on top of someone else's), 4 expired."""
    if not isinstance(resp, ConfigUpdateResponse):
        raise unexpected(resp)
    status = resp.status
    if status is ConfigUpdateStatus.OK:
        return WAIT if resp.index is None else Done(resp.index)
    if status is ConfigUpdateStatus.NOT_LEADER:
        return Redirect(resp.leader_id)
    if status is ConfigUpdateStatus.CONFIG_ERROR:
        err = resp.error
        name, message = (err.name, err.message) if err else ("Error", "rejected")
        raise ConfigUpdateError(int(status), name, message)
    if status is ConfigUpdateStatus.BUSY:
        raise ConfigUpdateError(int(status), "Busy", "another configuration change is in progress")
    raise RequestExpiredError(f"request id {request_id.hex()} rejected as expired by the leader")
