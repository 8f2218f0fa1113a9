"""Raft as a pure, deterministic state machine: no I/O, no clock, no threads.

Everything a driver (``raftlog.server.ready_executor``, used by the peer, the catch-up and the
simulator in ``tests/sim``) needs to know is in this docstring; the modules repeat the details
where they are implemented.

Construction (from durable state only)
--------------------------------------
::

    core = RaftCore(
        CoreConfig.from_millis(peer_id, tick_ms=10, ...),   # or CoreConfig(...) in ticks
        log_store,          # LogStore: the core only *reads* it
        snapshot_store,     # SnapshotStore: meta() and read() only
        hard_state_store.load(),
        seed_config=seed,                 # ConfigPayload from the config file
        rng=random.Random(),              # every random choice (election timeouts)
        new_request_id=request_ids.next,  # ids for CONFIG entries the leader writes itself
    )

The commit index restarts at ``hard_state.last_applied``. A peer that is the only member of
its configuration becomes leader at once (term + 1, in the first Ready). Inconsistent durable
state (``last_applied`` beyond the log, a log term above the current term, a compacted log
without a covering snapshot) raises ``ValueError``.

Inputs
------
* ``tick(count=1)``: ``count`` ticks of ``tick_ms`` passed (election timer, vote and
  AppendEntries retransmission, heartbeats). Time exists for the core only as ticks. Inputs
  stepped since the previous call count as observed at the end of the span, so a driver
  that was held up (a stall, SIGSTOP) steps what queued up in its sockets *first* and then
  calls ``tick(span)`` once: a follower that finds its leader's messages waiting does not
  campaign on the time it was away (issue #12: a resumed old leader deposed the new one).
* ``step_request(token, request)``: an inbound RequestVote / AppendEntries /
  InstallSnapshot. ``token`` is opaque (e.g. the ROUTER identity + msgid); the answer comes
  out as ``SendReply(token, response)``. RequestVotes from peers outside the configuration get
  no answer (docs/protocol.md §6); AppendEntries/InstallSnapshot are processed whoever sends them
  (only a term's leader can; see ``follower``).
* ``step_response(peer_id, request, response)``: an answer the transport matched by msgid to
  ``request`` -- the very object the core emitted in ``SendRequest(peer_id, request)``.
* ``propose(request_id, data, now_ms, prepare=None) -> NotLeader | Expired | Appended |
  Duplicate | Refused`` and
  ``propose_config(request_id, peers, now_ms) -> ConfigNotLeader | ConfigAccepted |
  ConfigDone | ConfigRejected | ConfigBusy | ConfigExpired`` (RequestUpdate / ConfigUpdate,
  §10.3-§10.4; every result carries what the reply needs). ``now_ms`` is the cluster clock
  (``raftlog.cluster_clock``), used only for request-id freshness; the keyword ``latest_ms``
  may widen only the future edge of that check.
* ``stamp_time(time_ms)``: the leader appends a time checkpoint (a CHECKPOINT entry carrying
  cluster time) so that the log clock moves where no topic entry moves it.
* ``read_index(context) -> bool``: a linearizable read on a leader (ReadIndex, thesis §6.4);
  answered by a ``ReadIndexReady(context, index)`` event once leadership is confirmed by a
  quorum after the read arrived (serve it when ``index`` is applied), or ``ReadIndexFailed``
  when this peer stops leading first. False (not queued) on a non-leader.
* ``applied(index)``: the state machine has durably applied up to ``index``.
* ``campaign()``: start an election now, as if the election timer had fired.
* ``heard_from_leader(leader_id, term)``: the driver received a *retransmission* of a request
  from ``leader_id`` that it answers from its debounce cache without stepping it (§6). The
  leader is alive: a follower of that leader in that term resets its election timer, exactly
  as a processed AppendEntries would. Without it a follower whose replies are lost (a one-way
  link) campaigns although it hears its leader (issue #12, finding 3).

Terms and indexes are bounded (``raftlog.bounds``): a message carrying a term above
``MAX_TERM`` or an index above ``MAX_INDEX`` is ignored (event ``MessageDropped``), and a peer
at ``MAX_TERM`` refuses to campaign (event ``CampaignRefused``) rather than create a term
nobody can encode.

Output: ``has_ready()`` / ``ready()`` / ``advance(ready)``
---------------------------------------------------------
Loop ``while core.has_ready(): r = core.ready(); ...; core.advance(r)``. Inputs may be stepped
while a Ready is being carried out; they land in the next one. Carry out each Ready in this
order (it is the only safe one):

0. ``messages_now``: send immediately (leader AppendEntries/InstallSnapshot; the leader's own
   copy of an entry counts for commitment only after step 3 and ``advance``).
1. ``hard_state``: save (term, vote, configuration; ``last_applied`` is the value last given to
   ``applied`` -- never write a smaller one than the state machine has).
   A saved ``config`` of None with a snapshot present means "unknown configuration".
2. ``snapshot_ops``: ``SnapshotChunkWrite`` -> ``snapshots.begin(index, term, total_size)`` +
   ``write_chunk(offset, data)``; ``SnapshotInstall`` -> ``snapshots.finish()`` if
   ``finish_receive``, ``log.compact(index, term)``, restore the state machine from the
   snapshot, persist its ``last_applied = index`` and call ``applied(index)``.
3. ``append``: ``log.append(first_index, entries)`` (implies truncation from ``first_index``).
   Steps 1-3 form one durability point: fsync before going on.
4. ``messages_after_persist``: send (vote replies, AppendEntries/InstallSnapshot replies, a
   candidate's RequestVotes -- each promises that 1-3 are durable).
5. ``committed``: apply the entries in order (skip CONFIG/CHECKPOINT data in the state
   machine; they still advance ``last_applied``), then ``applied(last_index)``. They are never
   beyond what is durable locally after step 3.
6. ``soft_state`` (role, leader id, term) and ``events``: on losing LEADER fail pending client
   requests with "not leader" (naming ``soft_state.leader_id``), cancel outstanding peer RPCs,
   drop RequestEntries pipelines. ``ConfigChangeCompleted(joint_index, final_index)``: answer
   pending ConfigUpdates for ``joint_index`` with ``[1, joint_index]``. ``ConfigChanged``:
   connect/disconnect peers (to ``RaftCore.connect_to``: the configuration's peers plus the
   ones being told of their removal). ``TruncationRefused`` / ``BadConfigEntry`` /
   ``SteppedDown`` / ``MessageDropped`` / ``CampaignRefused``: log. ``RemovedFromCluster``:
   log once; the peer service then stops (exit 0) unless configured to stay.
7. ``advance(ready)``.

Transport contract
------------------
A ``SendRequest`` carrying a new message object is sent as a **new** request with a **new**
msgid (per target peer, docs/protocol.md §6); one carrying the *very same object* as an earlier
``SendRequest`` to that peer is a retransmission and goes out with the **same** msgid and
frames (a reference follower debounces on it). The transport never retransmits on its own:
the core decides all retransmission on its ticks (RequestVote every ``vote_timeout_ticks``
until answered, as new requests; AppendEntries/InstallSnapshot on their response timeouts,
the identical request in stop-and-wait mode, see ``replication``). A response is matched by
msgid and handed back with the request object; late or duplicated responses may be handed
back too (they are ignored when stale). This matters because a reference follower truncates
its log after prevLogIndex on every AppendEntries and debounces only the last
(routing id, msgid) pair.

Read-only views: ``role``, ``is_leader``, ``term``, ``voted_for``, ``leader_id``,
``commit_index``, ``applied_index``, ``first_index``, ``last_index``, ``last_term``,
``term_at(i)``, ``config``, ``config_index``, ``config_known``, ``pending_config_change``.

Compaction is the driver's: it may snapshot the state machine at ``applied_index`` (or less),
``snapshots.install`` it and ``log.compact`` at any time between Readies; the core reads the
stores live and streams the current snapshot to followers that need it.
"""

from raftlog.consensus.core import RaftCore
from raftlog.consensus.ready import (
    BadConfigEntry,
    CampaignRefused,
    CommittedEntries,
    ConfigChangeCompleted,
    ConfigChanged,
    Event,
    FollowerLostEntries,
    LogAppend,
    MessageDropped,
    Outbound,
    ReadIndexFailed,
    ReadIndexReady,
    Ready,
    RemovedFromCluster,
    Role,
    SendReply,
    SendRequest,
    SnapshotChunkWrite,
    SnapshotInstall,
    SnapshotOp,
    SoftState,
    SteppedDown,
    TruncationRefused,
)
from raftlog.consensus.results import (
    Appended,
    ConfigAccepted,
    ConfigBusy,
    ConfigDone,
    ConfigExpired,
    ConfigNotLeader,
    ConfigProposeResult,
    ConfigRejected,
    Duplicate,
    Expired,
    NotLeader,
    ProposeResult,
    Refused,
)
from raftlog.consensus.settings import Bug, CoreConfig

__all__ = [
    "Appended",
    "BadConfigEntry",
    "Bug",
    "CampaignRefused",
    "CommittedEntries",
    "ConfigAccepted",
    "ConfigBusy",
    "ConfigChangeCompleted",
    "ConfigChanged",
    "ConfigDone",
    "ConfigExpired",
    "ConfigNotLeader",
    "ConfigProposeResult",
    "ConfigRejected",
    "CoreConfig",
    "Duplicate",
    "Event",
    "Expired",
    "LogAppend",
    "MessageDropped",
    "NotLeader",
    "Outbound",
    "ProposeResult",
    "Refused",
    "RaftCore",
    "ReadIndexFailed",
    "ReadIndexReady",
    "Ready",
    "RemovedFromCluster",
    "Role",
    "SendReply",
    "SendRequest",
    "SnapshotChunkWrite",
    "SnapshotInstall",
    "SnapshotOp",
    "SoftState",
    "SteppedDown",
    "TruncationRefused",
    "FollowerLostEntries",
]
