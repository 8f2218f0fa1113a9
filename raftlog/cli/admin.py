"""``raftlog-admin``: status, membership changes, publishing and reading, from a terminal.

The cluster to talk to comes from ``--config FILE`` (a cluster TOML: seed URLs and ident),
or ``--peers URL[,URL...]`` with ``--ident``; ``$RAFTLOG_CONFIG``, ``$RAFTLOG_PEERS`` and
``$RAFTLOG_IDENT`` stand in for the flags, and ``cluster-configs/local-3.toml`` is the default
when it exists (the cluster ``make run`` starts).

Exit codes scripts can rely on: 0 done; 1 the cluster refused (configuration error, busy,
expired request id); 2 bad usage or input; 3 the cluster is unreachable (no leader within
``--timeout``); 130 interrupted.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Final

from raftlog.cli import admin_topics
from raftlog.cli.admin_io import (
    EXIT_OK,
    EXIT_REFUSED,
    EXIT_UNAVAILABLE,
    EXIT_USAGE,
    UsageError,
    entry_line,
    parse_peer_args,
    peer_status,
    publish_all,
    render_table,
)
from raftlog.client import Peer, RaftClient, Subscriber, SyncRaftClient
from raftlog.client.models import IndexedEntry
from raftlog.config import load_cluster_file
from raftlog.entry import EntryType
from raftlog.errors import (
    ClusterUnavailableError,
    ConfigError,
    ConfigUpdateError,
    RequestExpiredError,
)
from raftlog.records import TopicError
from raftlog.rpc.config import decode_config_payload

DEFAULT_CONFIG: Final = Path("cluster-configs/local-3.toml")
PUBLISH_IN_FLIGHT: Final = 64


def _cluster(args: argparse.Namespace) -> tuple[list[str], str]:
    peers = args.peers or os.environ.get("RAFTLOG_PEERS")
    ident = args.ident or os.environ.get("RAFTLOG_IDENT")
    config = args.config or os.environ.get("RAFTLOG_CONFIG")
    if config is None and not peers and DEFAULT_CONFIG.is_file():
        config = str(DEFAULT_CONFIG)
    if config is not None:
        doc = load_cluster_file(config)
        urls = [str(p["url"]) for p in doc.get("peers", []) if isinstance(p, dict) and "url" in p]
        ident = ident or doc.get("cluster", {}).get("ident")
        if peers:
            urls = peers.split(",")
    else:
        urls = peers.split(",") if peers else []
    if not urls:
        raise UsageError("no peers: give --config FILE or --peers URL[,URL...]")
    if not isinstance(ident, str):
        raise UsageError("no cluster ident: give --ident or a --config file with one")
    return urls, ident


# -- commands --------------------------------------------------------------------------------
def cmd_status(args: argparse.Namespace, urls: list[str], ident: str) -> int:
    """``status``: every peer's role, term and progress in one table, from each peer's own
    RequestLogInfo (a down peer is shown, not hidden)."""
    with SyncRaftClient(urls, ident, timeout=args.timeout) as client:
        try:
            info = client.request_config()
            members = list(info.peers)
        except ClusterUnavailableError:
            info, members = None, [Peer("?", u) for u in urls]
    rows = [peer_status(p, ident, args.timeout) for p in members]
    leader_last = max((r.last_index for r in rows if r.is_leader), default=None)
    print(render_table(rows, leader_last))
    if info is None:
        print("no leader: the cluster is unavailable", file=sys.stderr)
        return EXIT_UNAVAILABLE
    return EXIT_OK


def cmd_config_show(args: argparse.Namespace, urls: list[str], ident: str) -> int:
    """``config show``: the configuration in effect, as the leader reports it."""
    with SyncRaftClient(urls, ident, timeout=args.timeout) as client:
        info = client.request_config()
    for peer in info.peers:
        mark = "  (leader)" if peer.id == info.leader_id else ""
        print(f"{peer.id}\t{peer.url}{mark}")
    return EXIT_OK


def cmd_config_change(args: argparse.Namespace, urls: list[str], ident: str) -> int:
    """``config add/remove/replace``: one ConfigUpdate computed from the current configuration;
    refusals are reported with the cluster's reason."""
    with SyncRaftClient(urls, ident, timeout=args.timeout) as client:
        current = list(client.request_config().peers)
        if args.action == "remove":
            unknown = set(args.items) - {p.id for p in current}
            if unknown:
                raise UsageError(f"not in the configuration: {', '.join(sorted(unknown))}")
            new = [p for p in current if p.id not in set(args.items)]
        else:
            given = parse_peer_args(args.items)
            if args.action == "add":
                clash = {p.id for p in given} & {p.id for p in current}
                if clash:
                    raise UsageError(f"already in the configuration: {', '.join(sorted(clash))}")
                new = current + given
            else:
                new = given
        print("current: " + " ".join(f"{p.id}={p.url}" for p in current))
        print("new:     " + " ".join(f"{p.id}={p.url}" for p in new))
        if args.dry_run:
            print("dry run: nothing sent")
            return EXIT_OK
        joint = client.config_update(new, timeout=args.timeout)
        print(f"joint configuration C(old,new) committed at index {joint}")
        final = _final_config_index(client, joint, args.timeout)
        print(f"final configuration C(new) committed at index {final}")
    return EXIT_OK


def _final_config_index(client: SyncRaftClient, joint: int, timeout: float) -> int:
    """The first final CONFIG entry after ``joint``, once committed (the leader serves only
    applied entries), found as the reference's ``zr-config`` does: by reading on."""
    deadline = time.monotonic() + timeout
    prev = joint
    while time.monotonic() < deadline:
        for item in client.request_entries(prev, timeout=timeout):
            if not isinstance(item, IndexedEntry):
                continue
            prev = item.index
            if item.entry.entry_type == EntryType.CONFIG and _is_final(item.entry.data):
                return item.index
        time.sleep(0.05)
    raise ClusterUnavailableError(f"C(new) after index {joint} not committed within {timeout}s")


def _is_final(data: bytes) -> bool:
    try:
        return not decode_config_payload(data).is_joint
    except ConfigError:
        return False


async def _publish(args: argparse.Namespace, urls: list[str], ident: str) -> int:
    records = _input_records(args)
    async with RaftClient(urls, ident, timeout=args.timeout) as client:
        indexes = await publish_all(
            records,
            client.request_update,
            in_flight=PUBLISH_IN_FLIGHT,
            show_progress=args.progress,
        )
    print(f"published {len(indexes)} record(s); last index {max(indexes, default=0)}")
    return EXIT_OK


def _input_records(args: argparse.Namespace) -> list[bytes]:
    chunks: list[bytes] = []
    sources = args.files or ["-"]
    for name in sources:
        raw = sys.stdin.buffer.read() if name == "-" else Path(name).read_bytes()
        if args.whole:
            chunks.append(raw)
        else:
            chunks.extend(line for line in raw.splitlines() if line)
    if any(not c for c in chunks):
        raise UsageError("empty records cannot be published")
    return chunks


async def _read(args: argparse.Namespace, urls: list[str], ident: str) -> int:
    async with RaftClient(urls, ident, timeout=args.timeout) as client:
        start = args.start
        if start is None or start < 0:
            info = await client.request_log_info()
            back = args.lines if start is None else -start
            start = max(1, info.last_applied - back + 1)
        if args.follow:
            sub = Subscriber(client, from_index=start - 1, skip_control=not args.all)
            try:
                async for item in sub:
                    print(entry_line(item, args.json), flush=True)
            finally:
                await sub.aclose()
            return EXIT_OK
        stream = client.request_entries(start - 1, args.count)
        async for item in stream:
            if isinstance(item, IndexedEntry):
                if not args.all and item.entry.entry_type != EntryType.STATE:
                    continue
                print(entry_line(item, args.json))
    return EXIT_OK


# -- argument parsing --------------------------------------------------------------------------
def build_parser() -> argparse.ArgumentParser:
    """The ``raftlog-admin`` command line (exit codes in the epilog)."""
    parser = argparse.ArgumentParser(
        prog="raftlog-admin",
        description="Inspect and administer a raftlog (or zmq-raft) cluster.",
        epilog="Exit codes: 0 ok, 1 refused by the cluster, 2 usage, 3 cluster unavailable.",
    )
    parser.add_argument("--config", "-c", help="cluster TOML file (seed URLs and ident)")
    parser.add_argument("--peers", help="comma-separated seed ROUTER URLs")
    parser.add_argument("--ident", help="cluster ident")
    parser.add_argument("--timeout", type=float, default=10.0, help="seconds (default 10)")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("status", help="every peer's role, term, indexes and lag")
    config = sub.add_parser("config", help="show or change the membership (joint consensus)")
    csub = config.add_subparsers(dest="action", required=True)
    csub.add_parser("show", help="the current configuration, from the leader")
    for action, what in (
        ("add", "add peers, given as ID=URL (or URL/ID)"),
        ("remove", "remove peers by id"),
        ("replace", "replace the whole configuration with ID=URL peers"),
    ):
        p = csub.add_parser(action, help=what)
        p.add_argument("items", nargs="+", metavar="PEER")
        p.add_argument("--dry-run", action="store_true", help="print the change, send nothing")
    pub = sub.add_parser("publish", help="publish lines (or whole files) as updates")
    pub.add_argument("files", nargs="*", help="input files (default: stdin)")
    pub.add_argument("--whole", action="store_true", help="each file is one record")
    pub.add_argument("--progress", action="store_true", help="progress line on stderr")
    pub.add_argument("--topic", help="publish topic records to this topic")
    pub.add_argument("--key", help="with --topic: the records' key")
    for name, help_text in (("read", "print committed entries"), ("tail", "the last entries")):
        r = sub.add_parser(name, help=help_text)
        r.add_argument("--from", dest="start", type=int, help="first index (negative: from end)")
        r.add_argument("--count", type=int, help="at most this many entries")
        r.add_argument("-n", "--lines", type=int, default=10, help="tail: how many (default 10)")
        r.add_argument("--follow", "-f", action="store_true", help="keep following live")
        r.add_argument("--json", action="store_true", help="one JSON object per entry")
        r.add_argument("--all", action="store_true", help="include CONFIG/CHECKPOINT entries")
        r.add_argument("--topic", help="read this topic's records (from the topic index)")
        r.add_argument("--from-time", help="with --topic: ISO 8601 time or ms since the epoch")
    admin_topics.add_parsers(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``raftlog-admin``: run one command, map failures to the documented exit
    codes with one clear error line."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        urls, ident = _cluster(args)
        if args.command == "status":
            return cmd_status(args, urls, ident)
        if args.command == "config":
            if args.action == "show":
                return cmd_config_show(args, urls, ident)
            return cmd_config_change(args, urls, ident)
        if args.command == "publish":
            if args.topic is not None:
                records = _input_records(args)
                return asyncio.run(admin_topics.publish_to_topic(args, urls, ident, records))
            return asyncio.run(_publish(args, urls, ident))
        if args.command == "topics":
            return asyncio.run(admin_topics.cmd_topics(args, urls, ident))
        if args.command == "compact":
            return admin_topics.cmd_compact(args, urls, ident)
        if args.topic is not None:
            return asyncio.run(admin_topics.read_topic(args, urls, ident))
        if args.from_time is not None:
            raise UsageError("--from-time needs --topic")
        if args.command == "read":
            args.start = 1 if args.start is None else args.start
        return asyncio.run(_read(args, urls, ident))
    except (UsageError, ConfigError, ValueError) as exc:
        print(f"raftlog-admin: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except (ConfigUpdateError, RequestExpiredError, TopicError) as exc:
        print(f"raftlog-admin: refused: {exc}", file=sys.stderr)
        return EXIT_REFUSED
    except ClusterUnavailableError as exc:
        print(f"raftlog-admin: unavailable: {exc}", file=sys.stderr)
        return EXIT_UNAVAILABLE
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
