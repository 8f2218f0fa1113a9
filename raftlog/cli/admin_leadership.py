"""``raftlog-admin leader transfer`` and ``raftlog-admin drain``: move leadership on purpose.

Leadership transfer is Raft's TimeoutNow (thesis §3.10) as a raftlog extension: the tool
picks a target (``--to ID``, else the voter whose log reaches furthest), checks that it is
a raftlog peer and caught up with the leader's commit index, and sends it ``AT``; the target
campaigns at once with RequestVotes marked ``transfer`` (which leader stickiness lets
through), and the tool waits until it leads.

Why the target is probed first: a reference ``zmq-raft`` peer must never receive a raftlog
extension. The probe is a RequestEntries with the ``any_peer`` frame (docs/protocol.md
§10.5), a message every peer handles: a raftlog follower serves it, a reference follower
ignores the frame and answers "not leader" -- so a reference target is refused before
anything it does not know is sent to it.

Drain (maintenance): ``AD`` makes a peer never campaign; if it leads, leadership is then
transferred away. Until ``--undo`` or a restart of that peer.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from typing import Final

from raftlog.cli.admin_io import EXIT_OK, UsageError, say, subcommand
from raftlog.client import RaftClient
from raftlog.errors import ClusterUnavailableError, RaftlogError
from raftlog.rpc.admin import (
    TYPE_DRAIN,
    TYPE_TAKE_LEADERSHIP,
    decode_drain_response,
    decode_take_leadership_response,
    drain_request,
)
from raftlog.rpc.messages import (
    TYPE_REQUEST_ENTRIES,
    EntriesStatus,
    Peer,
    RequestEntries,
    RequestEntriesResponse,
)
from raftlog.rpc.request_encoders import encode_request
from raftlog.rpc.response_decoders import decode_response

POLL: Final = 0.05
"""Seconds between two looks at who leads, while waiting for the target to win."""


class LeadershipError(RaftlogError):
    """A transfer or drain that cannot be done (a reference target, an unknown id, ...)."""


async def is_raftlog_peer(client: RaftClient, url: str, timeout: float) -> bool:
    """True when the follower at ``url`` is a raftlog peer (see the module docstring)."""
    info = await client.request_log_info(peer_url=url, fail_fast=True, timeout=timeout)
    probe = RequestEntries(max(info.first_index - 1, info.last_applied - 1, 0), 1, any_peer=True)
    frames = encode_request(probe, ident=b"-", id=b"\x00")
    answer = await client.peer_request(
        url, TYPE_REQUEST_ENTRIES, frames[3:], fail_fast=True, timeout=timeout
    )
    _, response = decode_response(TYPE_REQUEST_ENTRIES, [b"\x00", *answer])
    return isinstance(response, RequestEntriesResponse) and (
        response.status is not EntriesStatus.NOT_LEADER
    )


async def _pick_target(
    client: RaftClient, peers: tuple[Peer, ...], leader: str, wanted: str | None, timeout: float
) -> Peer:
    """The peer to hand leadership to: ``wanted``, or the raftlog voter furthest ahead."""
    others = [p for p in peers if p.id != leader]
    if wanted is not None:
        chosen = [p for p in others if p.id == wanted]
        if not chosen:
            raise LeadershipError(f"peer {wanted} is not a member of the cluster")
        others = chosen
    best: tuple[int, Peer] | None = None
    for peer in others:
        try:
            if not await is_raftlog_peer(client, peer.url, timeout):
                if wanted is not None:
                    raise LeadershipError(
                        f"peer {peer.id} is a reference zmq-raft peer: it cannot take a "
                        "leadership transfer (the extension is raftlog's); pick a raftlog peer"
                    )
                continue
            info = await client.request_log_info(peer_url=peer.url, fail_fast=True,
                                                 timeout=timeout)
        except ClusterUnavailableError:
            if wanted is not None:
                raise
            continue
        if best is None or info.last_index > best[0]:
            best = (info.last_index, peer)
    if best is None:
        raise LeadershipError("no other raftlog peer answered: nobody to hand leadership to")
    return best[1]


async def transfer(client: RaftClient, wanted: str | None, timeout: float) -> tuple[str, str]:
    """Move leadership to ``wanted`` (or the best raftlog voter); ``(old, new)`` leader ids
    (the same id twice when ``wanted`` already leads). ``LeadershipError`` when it cannot be
    done or another peer won the election."""
    config = await client.request_config()
    leader = config.leader_id
    if leader is None:
        raise ClusterUnavailableError("no leader to transfer leadership from")
    if wanted == leader:  # the wanted state already holds: nothing to do (idempotent)
        return leader, leader
    target = await _pick_target(client, config.peers, leader, wanted, timeout)
    deadline = time.monotonic() + timeout
    commit = (await client.request_log_info()).commit_index
    while True:  # the target must hold everything committed, or it cannot win
        info = await client.request_log_info(peer_url=target.url, fail_fast=True,
                                             timeout=timeout)
        if info.last_index >= commit:
            break
        if time.monotonic() > deadline:
            raise LeadershipError(f"peer {target.id} did not catch up to index {commit}")
        await asyncio.sleep(POLL)
    answer = await client.peer_request(
        target.url, TYPE_TAKE_LEADERSHIP, [], fail_fast=True, timeout=timeout
    )
    refusal = decode_take_leadership_response(answer)
    if refusal is not None:
        raise LeadershipError(f"peer {target.id} refused: {refusal}")
    while time.monotonic() < deadline:
        info = await client.request_log_info(peer_url=target.url, fail_fast=True,
                                             timeout=timeout)
        if info.is_leader:
            return leader, target.id
        if info.leader_id not in (None, leader, target.id):
            raise LeadershipError(f"peer {info.leader_id} won the election, not {target.id}")
        await asyncio.sleep(POLL)
    raise LeadershipError(f"peer {target.id} did not win within {timeout:g} s")


async def set_drain(client: RaftClient, peer_id: str, drained: bool, timeout: float) -> bool:
    """Drain (or undrain) ``peer_id``; its drain state afterwards."""
    config = await client.request_config()
    peer = next((p for p in config.peers if p.id == peer_id), None)
    if peer is None:
        raise LeadershipError(f"peer {peer_id} is not a member of the cluster")
    if peer_id != config.leader_id and not await is_raftlog_peer(client, peer.url, timeout):
        raise LeadershipError(f"peer {peer_id} is a reference zmq-raft peer: it cannot be drained")
    request = drain_request(drained)
    answer = await client.peer_request(
        peer.url, TYPE_DRAIN, request.args, fail_fast=True, timeout=timeout
    )
    return decode_drain_response(answer)


async def cmd_leader(args: argparse.Namespace, client: RaftClient) -> int:
    """``leader transfer [--to ID]``."""
    old, new = await transfer(client, args.to, args.timeout)
    moved = f"leadership moved from peer {old} to peer {new}"
    say(args, f"peer {new} already leads" if old == new else moved, previous=old, leader=new)
    return EXIT_OK


async def cmd_drain(args: argparse.Namespace, client: RaftClient) -> int:
    """``drain ID [--undo]``: drain a peer, handing its leadership off."""
    if not args.peer_id:
        raise UsageError("drain needs a peer id")
    state = await set_drain(client, args.peer_id, not args.undo, args.timeout)
    if args.undo:
        say(args, f"peer {args.peer_id} undrained: it may campaign again",
            peer=args.peer_id, drained=False)
        return EXIT_OK
    if not state:
        raise LeadershipError(f"peer {args.peer_id} did not stay drained")
    config = await client.request_config()
    if config.leader_id == args.peer_id:
        old, new = await transfer(client, None, args.timeout)
        say(args, f"peer {old} drained; leadership moved to peer {new}",
            peer=old, drained=True, leader=new)
    else:
        say(args, f"peer {args.peer_id} drained: it will not campaign (until --undo or a restart)",
            peer=args.peer_id, drained=True, leader=config.leader_id)
    return EXIT_OK


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``leader transfer`` and ``drain`` (docs/operations.md, "Emergency tools")."""
    leader = subcommand(
        sub,
        "leader",
        "move leadership on purpose (Raft's TimeoutNow; raftlog peers only)",
        "  raftlog-admin leader transfer            # to the voter furthest ahead\n"
        "  raftlog-admin leader transfer --to 2\n",
    )
    actions = leader.add_subparsers(dest="action", required=True, metavar="ACTION")
    move = subcommand(
        actions,
        "transfer",
        "hand leadership to another raftlog peer (exit 1 when it cannot, or another peer won)",
        "  raftlog-admin leader transfer --to 2\n",
    )
    move.add_argument("--to", metavar="ID", help="the peer to lead (default: the furthest ahead)")
    drain = subcommand(
        sub,
        "drain",
        "maintenance: a drained peer never campaigns, and hands leadership off if it leads "
        "(until --undo or its restart)",
        "  raftlog-admin drain 1\n  raftlog-admin drain 1 --undo\n",
    )
    drain.add_argument("peer_id", metavar="ID", help="the peer to drain")
    drain.add_argument("--undo", action="store_true", help="let the peer campaign again")
