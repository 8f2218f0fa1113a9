"""The ``raftlog-admin`` command line: every option, subcommand, help text and example.

Why a module of its own: the grammar is a third of the tool and changes for other reasons
than the running of a command (a new option, a help text, an example); ``admin.py`` keeps
the entry point that parses with it (``main``, which also answers shell completion through
argcomplete), resolves the cluster and dispatches. Each command family adds its own
subparsers from its module (``admin_topics``, ``admin_groups``, ``admin_leadership``, ...);
this module puts them together in the order ``--help`` lists them.
"""

from __future__ import annotations

import argparse
from typing import Final, NoReturn

from raftlog.cli import admin_bench, admin_keys, admin_leadership, admin_topics
from raftlog.cli.admin_cluster import DEFAULT_MAX_LAG
from raftlog.cli.admin_groups import add_parsers as add_group_parsers
from raftlog.cli.admin_io import EXIT_USAGE, subcommand
from raftlog.cli.admin_reads import add_consistency_args
from raftlog.cli.common import add_version_argument
from raftlog.cli.formats import check_format
from raftlog.client.models import MAX_ENTRY_DATA_SIZE, REFUSED_TIMEOUT

PROG: Final = "raftlog-admin"


class OneLineParser(argparse.ArgumentParser):
    """An argument parser whose usage errors are one line, like every other error."""

    def error(self, message: str) -> NoReturn:
        """Print ``PROG: error: MESSAGE (see PROG --help)`` and exit 2."""
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


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
    admin_topics.add_parsers(sub)  # and kv (admin_kv)
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
        add_consistency_args(parser)
