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
from typing import Final, NoReturn

import argcomplete

from raftlog.cli import admin_bench, admin_cluster, admin_keys, admin_leadership, admin_topics
from raftlog.cli.admin_cluster import DEFAULT_MAX_LAG
from raftlog.cli.admin_groups import add_parsers as add_group_parsers
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
    subcommand,
)
from raftlog.cli.admin_publish import PublishReport, check_inputs, publish_stream
from raftlog.cli.common import add_version_argument
from raftlog.cli.formats import check_format
from raftlog.client import RaftClient, SnapshotChunk, Subscriber
from raftlog.client.models import MAX_ENTRY_DATA_SIZE, REFUSED_TIMEOUT, IndexedEntry
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
PROG: Final = "raftlog-admin"


class OneLineParser(argparse.ArgumentParser):
    """An argument parser whose usage errors are one line, like every other error."""

    def error(self, message: str) -> NoReturn:
        """Print ``PROG: error: MESSAGE (see PROG --help)`` and exit 2."""
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


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
    async for item in client.request_entries(start - 1, args.count):
        if isinstance(item, SnapshotChunk):
            raise EntriesCompactedError(start, item.index + 1)
        if isinstance(item, IndexedEntry):
            if not args.all and item.entry.entry_type != EntryType.STATE:
                continue
            print(entry_line(item, args.json, args.format))
    return EXIT_OK


# -- argument parsing --------------------------------------------------------------------------
def build_parser() -> argparse.ArgumentParser:
    """The whole ``raftlog-admin`` command line."""
    parser: argparse.ArgumentParser = OneLineParser(
        prog=PROG,
        description="Inspect and administer a raftlog (or zmq-raft) cluster.",
        epilog="exit codes: 0 done, 1 refused (by the cluster or a safety check) or, for "
        "status, a member down, 2 bad usage or input, 3 cluster unavailable, "
        "130 interrupted; health: 0 OK, 1 degraded, 2 critical (Nagios).\n"
        "Each command has its own --help with examples.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_version_argument(parser)
    parser.add_argument("--config", "-c", help="cluster TOML file (seed URLs and ident)")
    parser.add_argument("--peers", help="comma-separated seed ROUTER URLs")
    parser.add_argument("--ident", help="cluster ident")
    parser.add_argument(
        "--timeout", type=float, default=10.0, help="seconds a command may take (default 10)"
    )
    parser.add_argument(
        "--refused-timeout",
        type=float,
        default=REFUSED_TIMEOUT,
        help="give up after every peer refused connections this long "
        f"(seconds, default {REFUSED_TIMEOUT:g})",
    )
    parser.add_argument(
        "--auth-key",
        help="CURVE client key (a name in the cluster file's keys_dir or a .key_secret path; "
        "default: the file's [security] client_key, or $RAFTLOG_CLIENT_KEY)",
    )
    parser.add_argument(
        "--max-entry-size",
        type=int,
        help="the cluster's max_log_entry_data_size in bytes (default: from --config, "
        f"else the peers' default {MAX_ENTRY_DATA_SIZE})",
    )
    parser.add_argument(
        "--output",
        "-o",
        choices=("table", "json"),
        default="table",
        help="text/tables for people (default) or JSON for scripts: one JSON document per "
        "command, JSON lines for read and tail",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    status = subcommand(
        sub,
        "status",
        "every peer's role, term, indexes and lag, members first, then the peers outside "
        "the configuration it can see (exit 1 when a member is down)",
        "  raftlog-admin status\n  raftlog-admin -o json status\n"
        "  raftlog-admin status --also 4=tcp://10.0.0.4:8047   # a peer catching up\n",
    )
    status.add_argument(
        "--also",
        action="append",
        default=[],
        metavar="ID=URL",
        help="also show this peer (e.g. one started outside the configuration); repeatable",
    )
    subcommand(
        sub,
        "health",
        "one-line Nagios-style check: 0 all members up and one leader, 1 degraded, "
        "2 no quorum, no leader or unreachable",
        "  raftlog-admin -c cluster.toml health\n",
    )
    _add_config_parsers(sub)
    _add_publish_parser(sub)
    _add_read_parsers(sub)
    admin_topics.add_parsers(sub)
    add_group_parsers(sub)  # groups, consume (issue #27)
    compact = subcommand(
        sub,
        "compact",
        "snapshot and drop the log prefix on every peer now",
        "  raftlog-admin compact\n  raftlog-admin compact --peer tcp://10.0.0.2:8047\n",
    )
    compact.add_argument("--peer", action="append", help="only these peer URLs (repeatable)")
    admin_leadership.add_parsers(sub)
    admin_bench.add_parser(sub)
    admin_keys.add_parsers(sub)
    return parser


def _add_config_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    config = subcommand(
        sub,
        "config",
        "show or change the membership (joint consensus)",
        "  raftlog-admin config show\n  raftlog-admin config add 4=tcp://10.0.0.4:8047\n",
    )
    csub = config.add_subparsers(dest="action", required=True, metavar="ACTION")
    subcommand(
        csub, "show", "the current configuration, from the leader", "  raftlog-admin config show\n"
    )
    for action, what, example in (
        ("add", "add voters, given as ID=URL (or URL/ID)", "add 4=tcp://10.0.0.4:8047"),
        ("remove", "remove voters by id", "remove 3"),
        ("replace", "replace the whole configuration with ID=URL peers", "replace 1=URL 2=URL"),
    ):
        p = subcommand(
            csub,
            action,
            what,
            f"  raftlog-admin config {example}\n  raftlog-admin config {example} --dry-run\n"
            "\nchecks (also run by --dry-run): the leader's own validation of the new list; "
            "each added voter\nanswers at its URL and is at most --max-lag entries behind "
            "(skipped by --force);\na warning for an even number of voters.\n",
        )
        p.add_argument("items", nargs="+", metavar="PEER")
        p.add_argument("--dry-run", action="store_true", help="run every check, send nothing")
        p.add_argument(
            "--force", action="store_true", help="add voters that do not answer or lag behind"
        )
        p.add_argument(
            "--max-lag",
            type=int,
            default=DEFAULT_MAX_LAG,
            help=f"entries a new voter may be behind the leader (default {DEFAULT_MAX_LAG})",
        )


def _add_publish_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    pub = subcommand(
        sub,
        "publish",
        "publish lines (or whole files) as updates, as they arrive",
        "  seq 1 100000 | raftlog-admin publish\n"
        "  tail -f app.log | raftlog-admin publish          # each line when it is written\n"
        "  raftlog-admin publish --whole report.pdf\n"
        "  raftlog-admin publish --topic orders --key c-1 orders.txt\n"
        "\nCtrl-C stops and reports how far the input is certainly in the log.\n",
    )
    pub.add_argument("files", nargs="*", help="input files (default: stdin; - is stdin)")
    pub.add_argument("--whole", action="store_true", help="each file is one record")
    pub.add_argument(
        "--no-progress", action="store_true", help="no progress bar (shown on a terminal only)"
    )
    pub.add_argument("--progress", action="store_true", help=argparse.SUPPRESS)  # older scripts
    pub.add_argument("--topic", help="publish topic records to this topic")
    pub.add_argument("--key", help="with --topic: the records' key")


def _add_read_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    read = subcommand(
        sub,
        "read",
        "print committed entries from an index on",
        "  raftlog-admin read                       # the whole log\n"
        "  raftlog-admin read --from 1000 --count 10\n"
        "  raftlog-admin read --from -5 --json      # the last five, as JSON\n"
        "  raftlog-admin read --topic orders --from-time 2026-01-01T00:00\n",
    )
    read.add_argument(
        "--from", dest="start", type=int, help="first index (default 1; negative: from the end)"
    )
    read.add_argument("--count", type=int, help="at most this many entries")
    read.add_argument("--topic", help="read this topic's records (from the topic index)")
    read.add_argument("--from-time", help="with --topic: ISO 8601 time or ms since the epoch")
    read.set_defaults(lines=10)
    tail = subcommand(
        sub,
        "tail",
        "print the last entries, and with -f follow new ones",
        "  raftlog-admin tail               # the last 10\n"
        "  raftlog-admin tail -n 100 -f     # the last 100, then live\n",
    )
    tail.add_argument("-n", "--lines", type=int, default=10, help="how many (default 10)")
    tail.set_defaults(start=None, count=None, topic=None, from_time=None)
    for parser in (read, tail):
        parser.add_argument("--follow", "-f", action="store_true", help="keep following live")
        parser.add_argument("--json", action="store_true", help="one JSON object per entry")
        parser.add_argument(
            "--format", type=check_format, metavar="FMT",
            help="kcat-style: %%i id, %%t topic, %%k key, %%v value, %%h headers, "
            "%%T time, %%S size, e.g. '%%k=%%v'",
        )
        parser.add_argument("--all", action="store_true", help="include CONFIG/CHECKPOINT entries")


# -- main --------------------------------------------------------------------------------------
COMMANDS: Final[Mapping[str, Callable[[argparse.Namespace, RaftClient], Awaitable[int]]]] = {
    "health": admin_cluster.cmd_health, "compact": admin_cluster.cmd_compact,
    "leader": admin_leadership.cmd_leader, "drain": admin_leadership.cmd_drain,
    "bench": admin_bench.cmd_bench, "topics": admin_topics.cmd_topics,
    "groups": cmd_groups, "consume": cmd_consume,
}  # the commands that take only the arguments and the client


async def run(args: argparse.Namespace) -> int:
    """Resolve the cluster, check local input, then run the command on one client."""
    if getattr(args, "output", "table") == "json" and hasattr(args, "json"):
        args.json = True  # read/tail: one JSON object per line
    target = resolve_target(args)
    names = check_inputs(args.files) if args.command == "publish" else []
    if args.command == "read" and args.topic is None and args.from_time is not None:
        raise UsageError("--from-time needs --topic")
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
