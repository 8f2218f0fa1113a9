"""``raftlog-admin`` cluster commands: ``status``, ``config show|add|remove|replace``,
``compact``.

Membership changes are checked before anything is sent, and ``--dry-run`` runs exactly the
same checks (only the final ConfigUpdate is skipped), so a dry run fails the way the real
command would, with the same message and exit code:

1. the new peer list is validated with the leader's own rule
   (:func:`raftlog.rpc.config.check_config_update`: no empty list, no duplicate ids or
   URLs, ids consistent with the current configuration, a change at all);
2. every voter being added must answer RequestLogInfo at its URL (a voter nobody started
   counts against the quorum from the joint configuration on) and be at most ``--max-lag``
   entries behind the leader (a far-behind voter makes commits wait for its catch-up);
   ``--force`` skips these two, not the first;
3. an even number of voters gets a warning: 4 voters tolerate one failure, like 3.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Mapping, Sequence
from typing import Final

from raftlog.cli.admin_health import cluster_health, status_json
from raftlog.cli.admin_io import (
    EXIT_DEGRADED,
    EXIT_OK,
    EXIT_UNAVAILABLE,
    STATUS_HEADER,
    SafetyCheckError,
    UsageError,
    parse_peer_args,
    peer_statuses,
    print_table,
    say,
    status_cells,
)
from raftlog.client import Peer, RaftClient
from raftlog.client.models import IndexedEntry
from raftlog.entry import EntryType
from raftlog.errors import (
    AuthenticationError,
    ClusterUnavailableError,
    ConfigError,
    ConfigUpdateError,
)
from raftlog.rpc.admin import TYPE_COMPACT, CompactStatus, decode_compact_response
from raftlog.rpc.clock import ask_clock
from raftlog.rpc.config import check_config_update, decode_config_payload, peers_to_json
from raftlog.rpc.messages import ConfigPayload, RequestLogInfoResponse

NOTHING: Final = (
    "nothing to compact (entries whose request ids are still remembered stay in the log so "
    "retries remain idempotent: docs/protocol.md §12.7, option request_id_ttl; and the log "
    "is never compacted past a record a topic still retains: docs/topics.md)"
)
HEALTH_LEADER_WAIT: Final = 5.0
"""Seconds ``health`` waits for a leader's configuration before judging the seed peers."""
DEFAULT_MAX_LAG: Final = 1000
"""Entries a new voter may be behind the leader before ``config add`` refuses it."""


# -- status ------------------------------------------------------------------------------------
async def cmd_status(
    args: argparse.Namespace, client: RaftClient, names: Mapping[str, str] | None = None
) -> int:
    """Every peer's own view -- the members, then the peers outside the configuration it
    can see (seeds of the cluster file or ``--peers``, and ``--also``: CLIENT-state peers
    catching up, or removed ones); exit 3 when no leader answers, 1 when a member is down.
    ``names``: peer ids by URL (the cluster file's), for seeds outside the configuration."""
    names = names or {}
    try:
        info = await client.request_config()
        members = list(info.peers)
    except AuthenticationError:
        raise  # not "down": the peers are there but refuse this key (exit 1, one line)
    except ClusterUnavailableError as exc:
        info, reason = None, str(exc)
        members = [Peer(names.get(u, "?"), u) for u in client.peer_urls]
    rows = await peer_statuses(client, members, args.timeout)
    if info is not None:
        rows += await peer_statuses(
            client,
            outside(members, client.peer_urls, names, args.also),
            args.timeout,
            member=False,
        )
    leader_last = max((r.last_index for r in rows if r.is_leader), default=None)
    if args.output == "json":
        print(status_json(rows, leader_last))
    else:
        print_table(STATUS_HEADER, status_cells(rows, leader_last))
    if info is None:
        print(f"raftlog-admin: unavailable: {reason}", file=sys.stderr)
        return EXIT_UNAVAILABLE
    down = [r.peer.id for r in rows if r.member and r.info is None]
    if down:
        print(f"raftlog-admin: degraded: member(s) down: {', '.join(down)}", file=sys.stderr)
        return EXIT_DEGRADED
    return EXIT_OK


async def cmd_health(args: argparse.Namespace, client: RaftClient) -> int:
    """Nagios-style check (``admin_health``): 0 OK, 1 degraded, 2 critical."""
    try:
        info = await client.request_config(timeout=min(args.timeout, HEALTH_LEADER_WAIT))
        members = list(info.peers)
    except ClusterUnavailableError:  # no leader: judge the seed peers by what they say
        members = [Peer("?", u) for u in client.peer_urls]
    rows = await peer_statuses(client, members, args.timeout)
    live = [r.peer for r in rows if r.info is not None]
    readings = await asyncio.gather(*(ask_clock(client, p.url, args.timeout) for p in live))
    health = cluster_health(rows, {p.id: r for p, r in zip(live, readings, strict=True)})
    up = [p.id for p in live]
    down = [r.peer.id for r in rows if r.info is None]
    say(args, health.line, status=health.label, code=health.code, reason=health.reason,
        up=up, down=down)
    return health.code


def outside(
    members: Sequence[Peer], seeds: Sequence[str], names: Mapping[str, str], also: Sequence[str]
) -> list[Peer]:
    """The peers to show besides the members: ``--also ID=URL`` items and the seed URLs,
    each once, minus every URL the configuration lists."""
    listed = {p.url for p in members}
    out: list[Peer] = []
    for peer in [*parse_peer_args(also), *(Peer(names.get(u, "?"), u) for u in seeds)]:
        if peer.url not in listed:
            listed.add(peer.url)
            out.append(peer)
    return out


# -- config ------------------------------------------------------------------------------------
async def cmd_config_show(args: argparse.Namespace, client: RaftClient) -> int:
    """The configuration as the leader knows it."""
    info = await client.request_config()
    if args.output == "json":
        peers = [{"id": p.id, "url": p.url, "leader": p.id == info.leader_id} for p in info.peers]
        print(json.dumps({"leader_id": info.leader_id, "peers": peers}, indent=2))
        return EXIT_OK
    rows = [(p.id, p.url, "leader" if p.id == info.leader_id else "member") for p in info.peers]
    print_table(("ID", "URL", "ROLE"), rows)  # a header on every table (issue #33)
    return EXIT_OK


def new_configuration(action: str, items: Sequence[str], current: Sequence[Peer]) -> list[Peer]:
    """The complete new peer list of ``config add|remove|replace ITEMS``."""
    if action == "remove":
        unknown = set(items) - {p.id for p in current}
        if unknown:
            raise UsageError(f"not in the configuration: {', '.join(sorted(unknown))}")
        return [p for p in current if p.id not in set(items)]
    given = parse_peer_args(items)
    if action == "add":
        clash = {p.id for p in given} & {p.id for p in current}
        if clash:
            raise UsageError(f"already in the configuration: {', '.join(sorted(clash))}")
        return [*current, *given]
    return given


def check_with_leader_rule(current: Sequence[Peer], new: Sequence[Peer]) -> None:
    """Refuse what the leader would refuse (status 2), with the leader's own message."""
    checked = check_config_update(ConfigPayload(new=tuple(current)), peers_to_json(tuple(new)))
    if not isinstance(checked, tuple):
        raise ConfigUpdateError(2, checked.name, checked.message)


async def check_new_voters(
    client: RaftClient, added: Sequence[Peer], max_lag: int, timeout: float
) -> None:
    """Every added voter answers RequestLogInfo and is at most ``max_lag`` entries behind
    the leader; ``SafetyCheckError`` otherwise."""
    if not added:
        return
    leader = await client.request_log_info(timeout=timeout)
    for peer in added:
        try:
            info = await client.request_log_info(peer_url=peer.url, fail_fast=True, timeout=timeout)
        except ClusterUnavailableError as exc:
            raise SafetyCheckError(
                f"peer {peer.id} at {peer.url} does not answer ({exc}); start it first "
                "(raftlog-peer --id ID --url URL ...), or pass --force"
            ) from None
        lag = behind(leader, info)
        if lag > max_lag:
            raise SafetyCheckError(
                f"peer {peer.id} at {peer.url} is {lag} entries behind the leader (more than "
                f"--max-lag {max_lag}); wait until it has downloaded the log (a started peer "
                "outside the configuration does), or pass --force to make it vote while "
                "replication catches it up"
            )


def behind(leader: RequestLogInfoResponse, peer: RequestLogInfoResponse) -> int:
    """How many committed entries ``peer`` lacks compared with the leader."""
    return max(0, leader.commit_index - peer.last_index)


def even_warning(new: Sequence[Peer]) -> str | None:
    """A warning for an even-sized voter set (same fault tolerance, bigger quorum)."""
    n = len(new)
    if n == 0 or n % 2:
        return None
    return (
        f"warning: {n} voters tolerate {(n - 1) // 2} failure(s), no more than {n - 1} would, "
        f"and need {n // 2 + 1} for a quorum; prefer an odd number of voters"
    )


async def cmd_config_change(args: argparse.Namespace, client: RaftClient) -> int:
    """``config add|remove|replace``: checks, then (unless ``--dry-run``) the change."""
    current = list((await client.request_config()).peers)
    new = new_configuration(args.action, args.items, current)
    if getattr(args, "output", "table") != "json":
        print("current: " + " ".join(f"{p.id}={p.url}" for p in current))
        print("new:     " + " ".join(f"{p.id}={p.url}" for p in new))
    check_with_leader_rule(current, new)
    known = {p.id for p in current}
    added = [p for p in new if p.id not in known]
    if args.force:
        print("--force: not checking that new voters answer and are caught up")
    else:
        await check_new_voters(client, added, args.max_lag, args.timeout)
    warning = even_warning(new)
    if warning is not None:
        print(f"raftlog-admin: {warning}", file=sys.stderr)
    peers = [{"id": p.id, "url": p.url} for p in new]
    if args.dry_run:
        say(args, "dry run: every check passed; nothing sent", dry_run=True, new=peers)
        return EXIT_OK
    joint = await client.config_update(new, timeout=args.timeout)
    if getattr(args, "output", "table") != "json":
        print(f"joint configuration C(old,new) committed at index {joint}")
    final = await final_config_index(client, joint, args.timeout)
    say(args, f"final configuration C(new) committed at index {final}",
        new=peers, joint_index=joint, final_index=final)
    return EXIT_OK


async def final_config_index(client: RaftClient, joint: int, timeout: float) -> int:
    """The first final CONFIG entry after ``joint``, once committed (the leader serves only
    applied entries), found as the reference's ``zr-config`` does: by reading on."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    prev = joint
    while loop.time() < deadline:
        async for item in client.request_entries(prev, timeout=timeout):
            if not isinstance(item, IndexedEntry):
                continue
            prev = item.index
            if item.entry.entry_type == EntryType.CONFIG and _is_final(item.entry.data):
                return item.index
        await asyncio.sleep(0.05)
    raise ClusterUnavailableError(f"C(new) after index {joint} not committed within {timeout}s")


def _is_final(data: bytes) -> bool:
    try:
        return not decode_config_payload(data).is_joint
    except ConfigError:
        return False


# -- compact -----------------------------------------------------------------------------------
async def cmd_compact(args: argparse.Namespace, client: RaftClient) -> int:
    """Ask each peer (``--peer``, default all) to compact; exit 3 if none answered."""
    targets = args.peer or [p.url for p in (await client.request_config()).peers]
    failed = 0
    for url in targets:
        try:
            frames = await client.peer_request(
                url, TYPE_COMPACT, [], fail_fast=True, timeout=args.timeout
            )
        except ClusterUnavailableError as exc:
            print(f"{url}\tno answer: {exc}", file=sys.stderr)
            failed += 1
            continue
        answer = decode_compact_response(frames)
        done = answer.status is CompactStatus.COMPACTED
        say(args, f"{url}\t" + (f"compacted to {answer.index}" if done else NOTHING),
            url=url, compacted_to=answer.index if done else None)
    return EXIT_UNAVAILABLE if failed == len(targets) else EXIT_OK
