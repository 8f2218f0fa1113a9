"""Leader-side RequestUpdate and ConfigUpdate decisions (docs/protocol.md §10.3, §10.4).

Idempotency is by request id and lives in the *log*, so it survives leader changes: a request
id already in this leader's log (stable, or appended and not yet durable) is never appended
again. Freshness (§3.1) is checked only for request ids the log does not know.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from raftlog.consensus import leader
from raftlog.consensus.batch import decide_batch
from raftlog.consensus.ready import Role
from raftlog.consensus.results import (
    WRONG_ENTRY_TYPE,
    ConfigAccepted,
    ConfigBusy,
    ConfigDone,
    ConfigExpired,
    ConfigNotLeader,
    ConfigProposeResult,
    ConfigRejected,
    NotLeader,
    ProposeResult,
)
from raftlog.consensus.state import CoreState
from raftlog.entry import ZERO_REQUEST_ID, EntryType, LogEntry, encode_time_checkpoint
from raftlog.ids import FreshWindow
from raftlog.rpc.config import check_config_update
from raftlog.rpc.messages import ConfigPayload, ConfigUpdateErrorInfo


def _window(s: CoreState, now_ms: int, latest_ms: int | None) -> FreshWindow:
    """The request-id acceptance window (§3.1) at these clock readings, by this core's
    settings: one per proposal, however many ids it checks."""
    cfg = s.cfg
    return FreshWindow.at(now_ms, cfg.request_id_ttl_ms, cfg.request_id_accept_margin_ms, latest_ms)


def propose(
    s: CoreState,
    request_id: bytes,
    data: bytes,
    now_ms: int,
    prepare: Callable[[bytes], bytes | Exception] | None = None,
    *,
    latest_ms: int | None = None,
) -> ProposeResult:
    """One RequestUpdate: ``propose_many`` of a batch of one (the rules have one home)."""
    return propose_many(s, ((request_id, data),), now_ms, prepare, latest_ms=latest_ms)[0]


def propose_many(
    s: CoreState,
    requests: Sequence[tuple[bytes, bytes]],
    now_ms: int,
    prepare: Callable[[bytes], bytes | Exception] | None = None,
    *,
    latest_ms: int | None = None,
) -> list[ProposeResult]:
    """§10.3 leader algorithm, steps 1-3, for ``(request_id, data)`` requests in arrival
    order (the driver keeps the pending-reply bookkeeping); one result per request.

    Exactly as if each were proposed alone, one after the other -- a request id seen earlier
    in the batch is a ``Duplicate`` of that entry, ``prepare`` runs in order -- but with one
    lookup of all the ids and one append: the leader proposes each ROUTER drain's
    RequestUpdates this way (issue #28). ``prepare`` sees the data of a request that
    is new (not a retry) at the leader only, and returns the data to append or why not -- so
    the one request-id lookup decides both."""
    if s.role is not Role.LEADER:
        return [NotLeader(s.leader_id)] * len(requests)
    log = s.log
    known = log.indexes_of_requests([request_id for request_id, _ in requests])
    fresh = _window(s, now_ms, latest_ms)
    entries, results = decide_batch(requests, known, prepare, fresh, s.term, log.last_index + 1)
    if entries:
        log.append(entries)
        s.replication_dirty = True
    return results


def propose_config(
    s: CoreState, request_id: bytes, peers: object, now_ms: int, *, latest_ms: int | None = None
) -> ConfigProposeResult:
    """§10.4 leader algorithm, in the reference's order. One deliberate difference: a change
    is also refused as busy while the last C(new) is not committed yet."""
    if s.role is not Role.LEADER:
        return ConfigNotLeader(s.leader_id)
    if s.pending_change is not None:
        pending_id, joint_index = s.pending_change
        return ConfigAccepted(joint_index) if pending_id == request_id else ConfigBusy()
    index = s.log.index_of_request(request_id)
    current = s.membership
    if index is None:
        if not _window(s, now_ms, latest_ms).admits(request_id):
            return ConfigExpired()
        checked = check_config_update(current.payload, peers)
        if isinstance(checked, ConfigUpdateErrorInfo):
            return ConfigRejected(checked)
        if current.is_joint or current.index > s.commit:
            return ConfigBusy()
        joint = ConfigPayload(new=checked, old=current.payload.new)
        joint_index = leader.append_config(s, joint, request_id)
        s.pending_change = (request_id, joint_index)
        return ConfigAccepted(joint_index)
    if index <= s.commit:
        return ConfigDone(index)
    if current.is_joint and current.index == index:
        return ConfigAccepted(index)
    return ConfigRejected(WRONG_ENTRY_TYPE)


def stamp_time(s: CoreState, time_ms: int) -> int | None:
    """Append a time checkpoint (``raftlog.cluster_clock``) at the leader; its index, or None
    when this peer does not lead. It carries no request id, so it is never deduplicated."""
    if s.role is not Role.LEADER:
        return None
    entry = LogEntry(ZERO_REQUEST_ID, EntryType.CHECKPOINT, s.term, encode_time_checkpoint(time_ms))
    index = s.log.append((entry,))
    s.replication_dirty = True
    return index
