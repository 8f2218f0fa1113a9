"""The console side of logging: one rendering for peers and ``make run``, unbuffered relay
of children's lines, log files that SIGHUP can reopen."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from raftlog.cli.local_cluster import LineRelay, render_peer_line
from raftlog.log import LogSink, render_console

RECORD = {
    "timestamp": "2026-11-23T18:39:44.123456Z",
    "level": "info",
    "event": "role_changed",
    "peer_id": "2",
    "role": "follower",
    "term": 3,
}


def test_console_line_has_time_level_peer_event_and_fields() -> None:
    line = render_console(RECORD)
    assert line == "18:39:44.123 INFO  [peer 2] role_changed role=follower term=3"


def test_leadership_changes_stand_out() -> None:
    plain = render_console({**RECORD, "event": "became_leader"})
    assert plain.startswith(">>> 18:39:44.123")
    coloured = render_console({**RECORD, "event": "became_leader"}, colors=True)
    assert "\x1b[" in coloured and "became_leader" in coloured
    assert not render_console(RECORD).startswith(">>>")


def test_warnings_show_their_level_and_exceptions_follow_the_line() -> None:
    line = render_console({**RECORD, "level": "warning", "exception": "Traceback\n  boom"})
    assert line.splitlines() == [
        "18:39:44.123 WARNING [peer 2] role_changed role=follower term=3",
        "Traceback",
        "  boom",
    ]


def test_make_run_renders_a_childs_json_line_like_a_lone_peer() -> None:
    raw = json.dumps(RECORD).encode()
    assert render_peer_line("2", raw) == render_console(RECORD)
    # a line that is not a JSON event (a traceback, a print) keeps its text, with the peer
    assert render_peer_line("3", b"Traceback (most recent call last):\n") == (
        "[peer 3] Traceback (most recent call last):"
    )


def test_relay_delivers_each_line_while_the_child_still_runs() -> None:
    """Two lines written in one go must both arrive before the child writes again or exits
    (a buffered readline kept the second one back until Ctrl-C)."""
    child = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import os, sys; os.write(1, b'one\\ntwo\\nthr'); sys.stdin.read(); "
            "os.write(1, b'ee\\nlast')",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    assert child.stdin is not None and child.stdout is not None
    relay = LineRelay()
    relay.add("1", child.stdout.fileno())
    try:
        got: list[tuple[str, bytes]] = []
        deadline = time.monotonic() + 20
        while len(got) < 2 and time.monotonic() < deadline:
            got += relay.poll(0.1)
        assert got == [("1", b"one"), ("1", b"two")]
        assert child.poll() is None  # the child is still waiting on its stdin
        child.stdin.close()
        while relay.open_count and time.monotonic() < deadline:
            got += relay.poll(0.1)
        assert got[2:] == [("1", b"three"), ("1", b"last")]
    finally:
        child.kill()
        child.wait(10)
        relay.close()


def test_log_file_reopens_in_place_after_rotation(tmp_path: Path) -> None:
    path = tmp_path / "peer.log"
    sink = LogSink.open_file(str(path))
    try:
        sink.write_line("before")
        path.rename(tmp_path / "peer.log.1")  # what logrotate does
        sink.write_line("still to the old file")
        assert sink.reopen()
        sink.write_line("after")
        assert (tmp_path / "peer.log.1").read_text() == "before\nstill to the old file\n"
        assert path.read_text() == "after\n"
    finally:
        os.close(sink.fd)


def test_stderr_sink_has_nothing_to_reopen() -> None:
    assert LogSink(2).reopen() is False
