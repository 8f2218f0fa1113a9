"""Answers of ``RaftCore.propose`` and ``RaftCore.propose_config``.

Each result maps onto exactly one reply of docs/protocol.md §10.3 (RequestUpdate) or §10.4
(ConfigUpdate); the driver only adds the "answer when applied" bookkeeping.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeAlias

from raftlog.rpc.messages import ConfigUpdateErrorInfo, ConfigUpdateStatus

# --- RequestUpdate (§10.3) -----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class NotLeader:
    """``[false, leader_id|nil]``."""

    leader_id: str | None


@dataclass(frozen=True, slots=True)
class Expired:
    """``[false]``: the request id is outside the acceptance window (§3.1)."""


@dataclass(frozen=True, slots=True)
class Appended:
    """A new STATE entry was appended at ``index``: answer ``[true]`` now and
    ``[true, index]`` once the state machine has applied ``index``."""

    index: int


@dataclass(frozen=True, slots=True)
class Duplicate:
    """The request id is already in the log (or in flight) at ``index``; nothing was appended.
    Answer ``[true, index]`` if ``index`` is applied, else ``[true]`` and wait for it."""

    index: int


@dataclass(frozen=True, slots=True)
class Refused:
    """The driver's ``prepare`` refused the data of a new request (e.g. a topic entry for a
    topic that does not exist); nothing was appended. ``reason`` is what ``prepare``
    returned, for the driver to answer with."""

    reason: Exception


ProposeResult: TypeAlias = NotLeader | Expired | Appended | Duplicate | Refused


# --- ConfigUpdate (§10.4) ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ConfigNotLeader:
    """``[0, leader_id|nil]``."""

    leader_id: str | None
    status: ConfigUpdateStatus = ConfigUpdateStatus.NOT_LEADER


@dataclass(frozen=True, slots=True)
class ConfigAccepted:
    """``[1]`` now; ``[1, joint_index]`` when ``ConfigChangeCompleted(joint_index, ...)``
    arrives (or ``[0, leader]`` if the leader steps down first)."""

    joint_index: int
    status: ConfigUpdateStatus = ConfigUpdateStatus.OK


@dataclass(frozen=True, slots=True)
class ConfigDone:
    """``[1, index]``: the request id is committed at ``index`` (any entry type, §10.4 (5))."""

    index: int
    status: ConfigUpdateStatus = ConfigUpdateStatus.OK


@dataclass(frozen=True, slots=True)
class ConfigRejected:
    """``[2, {name, message}]``."""

    error: ConfigUpdateErrorInfo
    status: ConfigUpdateStatus = ConfigUpdateStatus.CONFIG_ERROR


@dataclass(frozen=True, slots=True)
class ConfigBusy:
    """``[3]``: another change is in progress."""

    status: ConfigUpdateStatus = ConfigUpdateStatus.BUSY


@dataclass(frozen=True, slots=True)
class ConfigExpired:
    """``[4]``: the request id is outside the acceptance window."""

    status: ConfigUpdateStatus = ConfigUpdateStatus.EXPIRED


ConfigProposeResult: TypeAlias = (
    ConfigNotLeader | ConfigAccepted | ConfigDone | ConfigRejected | ConfigBusy | ConfigExpired
)

WRONG_ENTRY_TYPE: ConfigUpdateErrorInfo = ConfigUpdateErrorInfo(
    "Error", "wrong request id log entry type"
)
"""§10.4 (7): the request id belongs to an uncommitted entry that is not the current change."""
