"""A reader whose sender dies in the middle of a burst of multipart answers survives it.

With ``ZMQ_IMMEDIATE=1`` on a DEALER, libzmq 4.3.5 ends the connection's pipe from the socket's
side when the connection drops; a socket that is reading a multipart message then (it handles
commands every 100 frames, mid-message too) finds the rest of the message gone and aborts the
process: ``Assertion failed: !_more (src/fq.cpp:80)``. It killed a ``RaftClient`` reading
entries while the chaos runner restarted peers, and could kill a peer reading a burst of
answers from a peer that had just died. raftlog's DEALERs no longer set it (its gate is in
Python, ``raftlog.sockets``).

Each case runs ``reconnect_reader.py`` in a subprocess (an abort ends the whole process), once
as raftlog opens its sockets -- every answer must arrive whole -- and, as the negative control
that shows the scenario reaches the reader in the middle of a message, with ``IMMEDIATE=1``
put back: that run must abort, get stuck or lose answers.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from integration import reconnect_reader

READER = Path(reconnect_reader.__file__)
ROOT = READER.parents[2]
CONTROL_ATTEMPTS = 3
"""Runs of the negative control that may each miss the window (a busy machine can delay the
sender's close until the reader is done) before the test says the scenario is not reached."""


def _run(reader: str, *flags: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "tests")])}
    return subprocess.run(
        [sys.executable, str(READER), reader, *flags],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=ROOT,
        check=False,
    )


def _shows_the_bug(run: subprocess.CompletedProcess[str]) -> bool:
    """An abort in ``fq.cpp``, a stuck socket, or answers lost (see ``reconnect_reader``)."""
    if run.returncode == -signal.SIGABRT:
        assert "fq.cpp" in run.stderr, run.stderr[-2000:]
        return True
    if run.returncode == reconnect_reader.STUCK_EXIT:
        return True
    assert run.returncode == 0, f"rc={run.returncode}: {run.stderr[-2000:]}"
    return run.stdout.strip() != f"read {reconnect_reader.BURST}"


@pytest.mark.parametrize("reader", ["client", "peer"])
def test_a_reader_survives_its_sender_dying_in_the_middle_of_a_burst(reader: str) -> None:
    for _ in range(CONTROL_ATTEMPTS):
        control = _run(reader, "--immediate")
        if _shows_the_bug(control):
            break
    else:
        pytest.fail(
            "the negative control (IMMEDIATE=1) read every answer: the sender's close did not "
            f"reach the reader in the middle of a message; last output {control.stdout!r}"
        )
    fixed = _run(reader)
    assert fixed.returncode == 0, f"rc={fixed.returncode}: {fixed.stderr[-2000:]}"
    assert fixed.stdout.strip() == f"read {reconnect_reader.BURST}", fixed.stdout
