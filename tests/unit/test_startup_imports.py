"""What a peer process imports before it serves: the HTTP stack only when it has one.

Why a test: every peer start (and every cluster the suite starts, ~200 of them) paid ~0.2 s
of CPU importing aiohttp and the REST routes whether or not the peer had an ``http_url``.
They are now imported where a listener is started; a top-level import added anywhere on the
peer's import path would quietly bring the cost back.
"""

from __future__ import annotations

import subprocess
import sys

HTTP_MODULES = ("aiohttp", "raftlog.rest.app", "raftlog.observability.http")


def loaded_after(statement: str) -> set[str]:
    """The modules of ``HTTP_MODULES`` loaded by running ``statement`` in a new interpreter."""
    probe = (
        f"{statement}\nimport sys\n"
        f"print(' '.join(m for m in {HTTP_MODULES!r} if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    return set(out.stdout.split())


def test_the_peer_entry_point_does_not_import_the_http_stack() -> None:
    assert loaded_after("import raftlog.cli.peer, raftlog.server.node") == set()


def test_the_probe_sees_the_http_stack_when_it_is_imported() -> None:
    # negative control: the same probe reports the listener's modules once they are loaded
    assert loaded_after("import raftlog.observability.http") == {
        "aiohttp",
        "raftlog.observability.http",
    }
