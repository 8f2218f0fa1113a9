# PYTHON_ARGCOMPLETE_OK
"""``raftlog-admin``: status, membership changes, publishing and reading, from a terminal.

The cluster comes from ``--config FILE`` (a cluster TOML: seed URLs, ident, the peers'
``max_log_entry_data_size``) or ``--peers URL[,URL...]`` with ``--ident``; ``$RAFTLOG_CONFIG``,
``$RAFTLOG_PEERS``, ``$RAFTLOG_IDENT`` stand in for the flags; the default is
``cluster-configs/local-3.toml`` when it exists (the cluster ``make run`` starts).

Errors are one line on stderr (``raftlog-admin: <kind>: <why>``), never a traceback, with
exit codes scripts can rely on: 0 done; 1 refused (by the cluster, or by a safety check of
this tool, which says how to override it); 2 bad usage or input (unknown option, missing
file, an entry above the size limit); 3 the cluster is unavailable (every peer refuses
connections -- reported within ``--refused-timeout`` -- or no leader within ``--timeout``);
130 interrupted.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

import argcomplete

from raftlog.cli import admin_bench, admin_cluster, admin_keys, admin_leadership, admin_topics
from raftlog.cli.admin_groups import cmd_consume, cmd_groups
from raftlog.cli.admin_io import (
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_REFUSED,
    EXIT_UNAVAILABLE,
    EXIT_USAGE,
    UsageError,
    entry_line,
    key_from_cwd,
    say,
)
from raftlog.cli.admin_parser import PROG, build_parser
from raftlog.cli.admin_publish import PublishReport, check_inputs, publish_stream
from raftlog.cli.admin_reads import read_options
from raftlog.client import RaftClient, SnapshotChunk, Subscriber
from raftlog.client.models import MAX_ENTRY_DATA_SIZE, IndexedEntry
from raftlog.config import load_cluster_file
from raftlog.entry import EntryType
from raftlog.errors import (
    AuthenticationError,
    ClusterUnavailableError,
    ConfigError,
    EntriesCompactedError,
    RaftlogError,
)
from raftlog.security.settings import CurveClient, client_security

DEFAULT_CONFIG: Final = Path("cluster-configs/local-3.toml")
PUBLISH_IN_FLIGHT: Final = 64


@dataclass(frozen=True, slots=True)
class Target:
    """The cluster a command talks to."""

    urls: list[str]
    ident: str
    max_entry_size: int
    curve: CurveClient | None = None
    """The client's CURVE keys when the cluster file turns security on."""
    names: dict[str, str] = field(default_factory=dict)
    """Peer ids by URL, from the cluster file (``status`` names seeds outside the
    configuration with them)."""


def resolve_target(args: argparse.Namespace) -> Target:
    """Seeds, ident and entry size limit from the flags, the environment or a config file."""
    peers = args.peers or os.environ.get("RAFTLOG_PEERS")
    ident = args.ident or os.environ.get("RAFTLOG_IDENT")
    config = args.config or os.environ.get("RAFTLOG_CONFIG")
    if config is None and not peers and DEFAULT_CONFIG.is_file():
        config = str(DEFAULT_CONFIG)
    limit = MAX_ENTRY_DATA_SIZE
    names: dict[str, str] = {}
    curve: CurveClient | None = None
    auth_key = key_from_cwd(args.auth_key or os.environ.get("RAFTLOG_CLIENT_KEY"))
    if config is not None:
        doc = load_cluster_file(config)
        curve = client_security(doc, config, Path(config).resolve().parent, key=auth_key)
        listed = [p for p in doc.get("peers", []) if isinstance(p, dict) and "url" in p]
        urls = [str(p["url"]) for p in listed]
        names = {str(p["url"]): str(p["id"]) for p in listed if "id" in p}
        ident = ident or doc.get("cluster", {}).get("ident")
        configured = doc.get("raft", {}).get("max_log_entry_data_size")
        if isinstance(configured, int) and configured > 0:
            limit = configured
        if peers:
            urls = peers.split(",")
    else:
        urls = peers.split(",") if peers else []
    if not urls:
        raise UsageError("no peers: give --config FILE or --peers URL[,URL...]")
    if not isinstance(ident, str):
        raise UsageError("no cluster ident: give --ident or a --config file with one")
    if args.max_entry_size is not None:
        limit = args.max_entry_size
    if auth_key is not None and curve is None:
        raise UsageError("--auth-key needs a --config file whose [security] turns curve on")
    return Target(urls, ident, limit, curve, names)


def make_client(args: argparse.Namespace, target: Target) -> RaftClient:
    """The one client every command of this run uses."""
    return RaftClient(
        target.urls,
        target.ident,
        timeout=args.timeout,
        refused_timeout=args.refused_timeout,
        max_entry_size=target.max_entry_size,
        curve=target.curve,
    )


# -- publish -----------------------------------------------------------------------------------
async def cmd_publish(args: argparse.Namespace, client: RaftClient, names: list[str]) -> int:
    """Stream records to the log (or to a topic with ``--topic``); see ``admin_publish``."""
    unit = "file" if args.whole else "line"
    # find the leader first: the pipelined updates then leave in input order (and a cluster
    # that is down is reported before any input is read)
    await client.request_config()
    if args.topic is not None:
        return await admin_topics.publish_to_topic(args, client, names, unit)
    report: PublishReport[int] = PublishReport()
    try:
        await publish_stream(
            names,
            client.request_update,
            report,
            whole=args.whole,
            in_flight=PUBLISH_IN_FLIGHT,
            show_progress=not args.no_progress,
            check=client.check_entry_size,
        )
    except BaseException as error:
        if (line := report.failure_summary(unit, error)) is not None:
            print(f"{PROG}: {line}", file=sys.stderr)
        raise
    last = report.last_result()
    say(args, f"published {len(report.confirmed)} record(s); last index {last or 0}",
        published=len(report.confirmed), last_index=last or 0)
    return EXIT_OK


# -- read / tail -------------------------------------------------------------------------------
async def cmd_read(args: argparse.Namespace, client: RaftClient) -> int:
    """Print committed entries from ``--from`` (or the last ``-n``), optionally following. A
    start below the log's first index fails (``EntriesCompactedError``: the entries are in a
    snapshot now) instead of silently starting later (issue #11)."""
    start = args.start
    if start is None and args.command == "read":  # the whole log: from where it starts now
        start = (await client.request_log_info()).first_index
    elif start is None or start < 0:
        info = await client.request_log_info()
        back = args.lines if start is None else -start
        start = max(info.first_index, info.last_applied - back + 1)
    if args.follow:
        async with Subscriber(client, from_index=start - 1, skip_control=not args.all) as sub:
            async for item in sub:
                if isinstance(item, SnapshotChunk):
                    raise EntriesCompactedError(start, item.index + 1)
                print(entry_line(item, args.json, args.format), flush=True)
        return EXIT_OK
    async for item in client.request_entries(start - 1, args.count, **read_options(args, raw=True)):
        if isinstance(item, SnapshotChunk):
            raise EntriesCompactedError(start, item.index + 1)
        if isinstance(item, IndexedEntry):
            if not args.all and item.entry.entry_type != EntryType.STATE:
                continue
            print(entry_line(item, args.json, args.format))
    return EXIT_OK


# -- main --------------------------------------------------------------------------------------
COMMANDS: Final[Mapping[str, Callable[[argparse.Namespace, RaftClient], Awaitable[int]]]] = {
    "health": admin_cluster.cmd_health, "compact": admin_cluster.cmd_compact,
    "leader": admin_leadership.cmd_leader, "drain": admin_leadership.cmd_drain,
    "bench": admin_bench.cmd_bench, "topics": admin_topics.cmd_topics,
    "kv": admin_topics.cmd_topics, "groups": cmd_groups, "consume": cmd_consume,
}  # the commands that take only the arguments and the client


async def run(args: argparse.Namespace) -> int:
    """Resolve the cluster, check local input, then run the command on one client."""
    if getattr(args, "output", "table") == "json" and hasattr(args, "json"):
        args.json = True  # read/tail: one JSON object per line
    target = resolve_target(args)
    names = check_inputs(args.files) if args.command == "publish" else []
    if args.command == "read" and args.topic is None and args.from_time is not None:
        raise UsageError("--from-time needs --topic")
    if args.command == "publish" and args.topic is None and admin_topics.conditional(args):
        raise UsageError("--expect-last-id and --expect-key-last-id need --topic")
    async with make_client(args, target) as client:
        if args.command == "status":
            return await admin_cluster.cmd_status(args, client, target.names)
        if args.command == "config":
            if args.action == "show":
                return await admin_cluster.cmd_config_show(args, client)
            return await admin_cluster.cmd_config_change(args, client)
        if (command := COMMANDS.get(args.command)) is not None:
            return await command(args, client)
        if args.command == "publish":
            return await cmd_publish(args, client, names)
        if args.topic is not None:
            return await admin_topics.read_topic(args, client)
        return await cmd_read(args, client)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point: one line on stderr for every error, and the documented exit code."""
    parser = build_parser()
    argcomplete.autocomplete(parser)  # a no-op unless the shell asks for completions
    args = parser.parse_args(argv)
    try:
        if args.command == "keys":  # needs no cluster
            return admin_keys.cmd_keys(args)
        return asyncio.run(run(args))
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except BrokenPipeError:  # `raftlog-admin read | head`: the reader had enough
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no flush error at exit
        return EXIT_OK
    except (UsageError, ConfigError, ValueError) as exc:  # EntryTooLargeError is a ValueError
        return _fail("error", exc, EXIT_USAGE)
    except OSError as exc:
        return _fail("error", exc, EXIT_USAGE)
    except AuthenticationError as exc:  # the cluster is there but will not talk to us
        return _fail("refused", exc, EXIT_REFUSED)
    except ClusterUnavailableError as exc:
        return _fail("unavailable", exc, EXIT_UNAVAILABLE)
    except RaftlogError as exc:  # refused by the cluster, or by a safety check
        return _fail("refused", exc, EXIT_REFUSED)
    except Exception as exc:  # a bug: still one line, but say what it was
        return _fail("internal error", f"{type(exc).__name__}: {exc}", EXIT_REFUSED)


def _fail(kind: str, exc: object, code: int) -> int:
    text = " ".join(str(exc).split()) or type(exc).__name__
    print(f"{PROG}: {kind}: {text}", file=sys.stderr)
    return code


if __name__ == "__main__":
    sys.exit(main())
