"""``raftlog-peer``: run one peer of a cluster described by a TOML file.

Signals: SIGTERM/SIGINT stop the peer cleanly; SIGHUP reopens the ``--log-file`` and
re-reads the cluster file to report settings that need a restart (``raftlog.server.hangup``),
and never stops the peer.

Exit codes (``raftlog.server.exit_codes``): 0 clean shutdown (SIGTERM/SIGINT, or this peer was
removed from the cluster and ``exit_when_removed`` is on), 2 bad configuration or command line
(one error line, nothing touched), 3 storage failure (full disk, I/O error, corruption), 4 the
data directory holds a term or index above the ceiling of ``raftlog.bounds`` (one error line
naming the offline repair, ``raftlog-tool reset-term``), 1 any other unexpected error.

A failure while closing the stores after another failure (a full disk fails the topic index's
flush again) is logged as ``close_failed`` and never replaces the first failure's exit code.
"""

from __future__ import annotations

import argparse
import signal
import sys
from pathlib import Path
from typing import Any

import zmq

from raftlog.cli.common import add_version_argument
from raftlog.config import PeerSettings, check_data_dir, load_peer_config
from raftlog.errors import (
    ConfigError,
    DurableStateOutOfRangeError,
    StorageCorruptionError,
    StorageError,
)
from raftlog.log import configure_logging, get_logger
from raftlog.observability.http_settings import ListenerError
from raftlog.server.exit_codes import (
    EXIT_CONFIG,
    EXIT_OK,
    EXIT_OUT_OF_RANGE,
    EXIT_STORAGE,
)
from raftlog.server.hangup import HangupHandler
from raftlog.server.node import PeerNode
from raftlog.storage.private import private_umask, tighten_tree


def _parse_set(values: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in values:
        name, sep, raw = item.partition("=")
        if not sep or not name:
            raise ConfigError(f"--set expects NAME=VALUE, got {item!r}")
        value: Any = raw
        low = raw.lower()
        if low in ("true", "false"):
            value = low == "true"
        elif raw.lstrip("-").isdigit():
            value = int(raw)
        out[name.strip()] = value
    return out


def build_parser() -> argparse.ArgumentParser:
    """The ``raftlog-peer`` command line."""
    parser = argparse.ArgumentParser(
        prog="raftlog-peer",
        description="Run one peer of a raftlog cluster (ØMQ RAFT protocol, zmq-raft compatible).",
    )
    add_version_argument(parser)
    parser.add_argument("--config", "-c", required=True, help="cluster TOML file")
    parser.add_argument("--id", required=True, help="this peer's id")
    parser.add_argument(
        "--url", help="advertised ROUTER URL (required if the id is not in the file)"
    )
    parser.add_argument("--bind", help="ROUTER bind URL, if not the advertised one")
    parser.add_argument("--pub-url", help="advertised PUB URL of the BroadcastStateMachine")
    parser.add_argument("--pub-bind", help="PUB bind URL, if not the advertised one")
    parser.add_argument("--data-dir", help="data directory (default: from the file)")
    parser.add_argument("--ident", help="cluster ident (default: from the file)")
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="OPTION=VALUE",
        help="override a raft option, e.g. --set election_timeout_min=300 (repeatable)",
    )
    parser.add_argument(
        "--key",
        help="this peer's CURVE key (name in the keys dir or a .key_secret path) when it is "
        "not in the cluster file (a peer joining a secure cluster)",
    )
    parser.add_argument("--log-level", default=None, help="debug|info|warning|error")
    parser.add_argument("--log-format", choices=("console", "json"), default=None)
    parser.add_argument(
        "--log-file", default=None, help="append logs to this file (reopened on SIGHUP)"
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``raftlog-peer``: load the configuration, run the peer until a signal, and
    exit with the code the module docstring lists."""
    args = build_parser().parse_args(argv)
    try:
        configure_logging(
            args.log_level,
            json=None if args.log_format is None else args.log_format == "json",
            log_file=args.log_file,
        )

        def read_settings() -> PeerSettings:
            return load_peer_config(
                args.config,
                args.id,
                url=args.url,
                bind_url=args.bind,
                pub_url=args.pub_url,
                pub_bind_url=args.pub_bind,
                data_dir=args.data_dir,
                ident=args.ident,
                overrides=_parse_set(args.set),
                key=args.key,
            )

        settings = read_settings()
        check_data_dir(settings.data_dir)
    except (ConfigError, ValueError) as exc:
        print(f"raftlog-peer: error: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    log = get_logger(peer_id=settings.id)
    private_umask()  # issue #25: the log and RocksDB's files are for this user only
    tightened = tighten_tree(settings.data_dir)
    if tightened:
        log.warning("data_dir_modes_tightened", data_dir=str(settings.data_dir), paths=tightened)
    # Before opening anything: start-up (storage checks, a catch-up download) can take a
    # while, and SIGHUP's default action would kill the peer meanwhile.
    hangup = HangupHandler(settings, read_settings, log)
    signal.signal(signal.SIGHUP, hangup)
    try:
        node = PeerNode(settings)
    except DurableStateOutOfRangeError as exc:
        log.error("durable_state_out_of_range", error=str(exc))
        print(f"raftlog-peer: error: {exc}", file=sys.stderr)
        return EXIT_OUT_OF_RANGE
    except StorageCorruptionError as exc:
        return _corrupt(settings.data_dir, exc, log)
    except StorageError as exc:
        log.error("storage_open_failed", error=str(exc))
        print(f"raftlog-peer: error: {exc}", file=sys.stderr)
        return EXIT_STORAGE
    except zmq.ZMQError as exc:
        print(f"raftlog-peer: error: cannot bind sockets: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    except ListenerError as exc:
        print(f"raftlog-peer: error: {exc}", file=sys.stderr)
        return EXIT_CONFIG

    def on_signal(signum: int, _frame: object) -> None:
        log.info("signal_received", signal=signal.Signals(signum).name)
        node.stop()

    hangup.also = node.request_reload  # a secure peer re-reads its client allowlist
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    code = EXIT_OK
    try:
        node.run()
    except StorageCorruptionError as exc:
        _close(node, log)
        return _corrupt(settings.data_dir, exc, log)
    except StorageError as exc:
        log.error("storage_failed", error=str(exc))
        code = EXIT_STORAGE
    except BaseException:
        _close(node, log)  # the original error (exit 1, traceback) stays the one reported
        raise
    if not _close(node, log) and code == EXIT_OK:
        code = EXIT_STORAGE  # a clean run whose final flush failed did lose its last writes
    log.info("peer_stopped", exit_code=code)
    return code


def corruption_line(data_dir: Path, exc: StorageCorruptionError) -> str:
    """The one line a peer says when its data is corrupt: what, and how to recover."""
    return (
        f"raftlog-peer: corrupt data: {exc}; this peer will not serve or vote. Rebuild it "
        f"from the other peers: mv {data_dir} {data_dir}.corrupt, then start it again "
        "(docs/operations.md §2, A peer's data is corrupt)"
    )


def _corrupt(data_dir: Path, exc: StorageCorruptionError, log: Any) -> int:
    """Report corruption (log event ``storage_corrupt`` and the line on stderr); exit 3."""
    line = corruption_line(data_dir, exc)
    log.error("storage_corrupt", error=str(exc), recovery=line.split("Rebuild it ", 1)[1])
    print(line, file=sys.stderr)
    return EXIT_STORAGE


def _close(node: PeerNode, log: Any) -> bool:
    """Close the node; a failure is logged, never raised (it must not mask the failure that
    ended the run: issue #12, finding 2). False when closing failed."""
    try:
        node.close()
    except Exception as exc:
        log.error("close_failed", error=str(exc), error_type=type(exc).__name__)
        return False
    return True


if __name__ == "__main__":
    sys.exit(main())
