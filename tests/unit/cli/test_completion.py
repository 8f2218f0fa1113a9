"""Shell completion (issue #33 item 8): raftlog-admin and raftlog-tool complete their
subcommands through argcomplete, the way `register-python-argcomplete` drives them."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

BIN = Path(sys.executable).parent


@pytest.mark.parametrize(
    ("program", "line", "expected"),
    [
        ("raftlog-admin", "raftlog-admin lea", "leader"),
        ("raftlog-admin", "raftlog-admin leader tr", "transfer"),
        ("raftlog-tool", "raftlog-tool force", "force-new-cluster"),
    ],
)
def test_the_shell_completes_subcommands(
    tmp_path: Path, program: str, line: str, expected: str
) -> None:
    out = tmp_path / "completions"
    env = dict(
        os.environ,
        _ARGCOMPLETE="1",
        _ARGCOMPLETE_SHELL="bash",
        COMP_LINE=line,
        COMP_POINT=str(len(line)),
        _ARGCOMPLETE_STDOUT_FILENAME=str(out),
    )
    subprocess.run([str(BIN / program)], env=env, timeout=60, check=False, capture_output=True)
    assert expected in out.read_text().split()
