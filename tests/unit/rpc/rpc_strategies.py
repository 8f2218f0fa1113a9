"""Hypothesis strategies for every ØMQ RAFT message, shared by the round-trip and fuzz tests."""

from __future__ import annotations

from hypothesis import strategies as st

from raftlog.bounds import MAX_TERM
from raftlog.entry import MAX_ENTRY_TERM, LogEntry
from raftlog.rpc.codec import CORE_TYPES
from raftlog.rpc.frames import MAX_SAFE_INTEGER
from raftlog.rpc.messages import (
    AppendEntries,
    AppendEntriesResponse,
    ClientDispatch,
    ClientDispatchResponse,
    ConfigUpdate,
    ConfigUpdateErrorInfo,
    ConfigUpdateResponse,
    ConfigUpdateStatus,
    EntriesStatus,
    InstallSnapshot,
    InstallSnapshotResponse,
    Peer,
    Request,
    RequestBroadcastStateUrl,
    RequestBroadcastStateUrlResponse,
    RequestConfig,
    RequestConfigResponse,
    RequestEntries,
    RequestEntriesResponse,
    RequestLogInfo,
    RequestLogInfoResponse,
    RequestUpdate,
    RequestUpdateResponse,
    RequestVote,
    RequestVoteResponse,
    Response,
    SnapshotChunk,
    StateBroadcast,
    UpdateStatus,
)

uints = st.one_of(st.integers(0, 300), st.integers(0, MAX_SAFE_INTEGER))
opt_uints = st.none() | uints
texts = st.text(max_size=20)
ids = st.text(min_size=1, max_size=20)
leaders = st.none() | ids
request_ids = st.binary(min_size=12, max_size=12)
idents = st.binary(max_size=16)
entries = st.builds(
    LogEntry,
    request_id=request_ids,
    entry_type=st.integers(0, 255),
    term=st.integers(0, MAX_ENTRY_TERM),
    data=st.binary(min_size=1, max_size=64),
)
entry_lists = st.lists(entries, max_size=8).map(tuple)
# Peer RPCs carry terms and indexes only up to raftlog.bounds' ceiling (larger ones are refused
# by the decoders, see test_codec_bounds.py); ``- 8`` leaves room for the entries appended.
peer_uints = st.one_of(st.integers(0, 300), st.integers(0, MAX_TERM - 8))
opt_peer_uints = st.none() | peer_uints
peer_entry_lists = st.lists(
    st.builds(
        LogEntry,
        request_id=request_ids,
        entry_type=st.integers(0, 255),
        term=st.integers(0, MAX_TERM),
        data=st.binary(min_size=1, max_size=64),
    ),
    max_size=8,
).map(tuple)
peers = st.builds(Peer, id=texts, url=texts)
peer_lists = st.lists(peers, max_size=6).map(tuple)
custom_types = st.binary(min_size=1, max_size=4).filter(lambda t: t not in CORE_TYPES)

requests: st.SearchStrategy[Request] = st.one_of(
    st.builds(RequestVote, ids, peer_uints, peer_uints, peer_uints),
    st.builds(AppendEntries, ids, *[peer_uints] * 4, peer_entry_lists),
    st.builds(InstallSnapshot, ids, *[peer_uints] * 3, uints, uints, st.binary(max_size=64)),
    st.just(RequestConfig()),
    st.just(RequestLogInfo()),
    st.builds(RequestUpdate, request_ids, st.binary(min_size=1, max_size=64)),
    st.builds(ConfigUpdate, request_ids, peer_lists),
    st.builds(RequestEntries, uints, opt_uints, opt_uints),
    st.just(RequestBroadcastStateUrl()),
    st.builds(
        ClientDispatch, custom_types, st.lists(st.binary(max_size=16), max_size=4).map(tuple)
    ),
)

update_responses = st.one_of(
    st.builds(RequestUpdateResponse, request_ids, st.just(UpdateStatus.ACCEPTED)),
    st.builds(RequestUpdateResponse, request_ids, st.just(UpdateStatus.DONE), index=uints),
    st.builds(
        RequestUpdateResponse, request_ids, st.just(UpdateStatus.NOT_LEADER), leader_id=leaders
    ),
    st.builds(RequestUpdateResponse, request_ids, st.just(UpdateStatus.EXPIRED)),
)
config_update_responses = st.one_of(
    st.builds(
        ConfigUpdateResponse, request_ids, st.just(ConfigUpdateStatus.NOT_LEADER), leader_id=leaders
    ),
    st.builds(ConfigUpdateResponse, request_ids, st.just(ConfigUpdateStatus.OK), index=opt_uints),
    st.builds(
        ConfigUpdateResponse,
        request_ids,
        st.just(ConfigUpdateStatus.CONFIG_ERROR),
        error=st.builds(ConfigUpdateErrorInfo, texts, texts),
    ),
    st.builds(ConfigUpdateResponse, request_ids, st.just(ConfigUpdateStatus.BUSY)),
    st.builds(ConfigUpdateResponse, request_ids, st.just(ConfigUpdateStatus.EXPIRED)),
)
entries_responses = st.one_of(
    st.builds(RequestEntriesResponse, st.just(EntriesStatus.NOT_LEADER), leader_id=leaders),
    st.builds(
        RequestEntriesResponse,
        st.sampled_from([EntriesStatus.LAST, EntriesStatus.MORE]),
        last_index=uints,
        entries=entry_lists,
    ),
    st.builds(
        RequestEntriesResponse,
        st.just(EntriesStatus.SNAPSHOT),
        snapshot=st.builds(SnapshotChunk, uints, uints, uints, uints, st.binary(max_size=64)),
    ),
)

# (request type, response) pairs: responses are decoded against the type that was asked.
responses: st.SearchStrategy[tuple[bytes, Response]] = st.one_of(
    st.tuples(st.just(b"?"), st.builds(RequestVoteResponse, peer_uints, st.booleans())),
    st.tuples(
        st.just(b"+"),
        st.one_of(  # a success carries no hint; only a success can carry the mark
            st.builds(AppendEntriesResponse, peer_uints, st.just(True), st.none(), st.booleans()),
            st.builds(AppendEntriesResponse, peer_uints, st.just(False), opt_peer_uints),
        ),
    ),
    st.tuples(st.just(b"$"), st.builds(InstallSnapshotResponse, peer_uints, opt_uints)),
    st.tuples(st.just(b"^"), st.builds(RequestConfigResponse, st.booleans(), leaders, peer_lists)),
    st.tuples(
        st.just(b"%"),
        st.builds(RequestLogInfoResponse, st.booleans(), leaders, *[uints] * 7),
    ),
    st.tuples(st.just(b"="), update_responses),
    st.tuples(st.just(b"&"), config_update_responses),
    st.tuples(st.just(b"<"), entries_responses),
    st.tuples(st.just(b"*"), st.builds(RequestBroadcastStateUrlResponse, texts)),
    st.tuples(
        custom_types,
        st.builds(ClientDispatchResponse, st.lists(st.binary(max_size=16), max_size=4).map(tuple)),
    ),
)


broadcasts = st.builds(StateBroadcast, uints, uints, entry_lists)
