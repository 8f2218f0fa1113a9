"""Pytest fixtures for interop tests against the Node.js reference (npm ``zmq-raft``).

Why fixtures here: every interop test needs the reference installed (once per session) and
most need a running reference cluster with a leader; both must fail loudly — an interop suite
that silently skips when the reference is missing proves nothing.
"""

from __future__ import annotations

import subprocess
from collections.abc import Generator, Iterator
from pathlib import Path

import pytest
from reference import INSTALL_SCRIPT, INTEROP_DIR, ZMQ_RAFT_BIN, ReferenceCluster


@pytest.fixture(scope="session")
def reference_installed() -> Path:
    """Run ``install_reference.sh`` once per session and return the install directory.

    Fails (never skips) with the script's error output when the install does not work.
    The script is idempotent and takes well under a second when already installed.
    """
    proc = subprocess.run(
        ["bash", str(INSTALL_SCRIPT)],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    if proc.returncode != 0 or not ZMQ_RAFT_BIN.is_file():
        pytest.fail(
            "installing the reference zmq-raft failed "
            f"(exit status {proc.returncode}):\n{proc.stderr}\n{proc.stdout}",
            pytrace=False,
        )
    return INTEROP_DIR


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """Remember each phase's report on the item so fixtures can see whether the test failed."""
    report = yield
    setattr(item, f"_interop_rep_{report.when}", report)
    return report


def _failed(request: pytest.FixtureRequest) -> bool:
    rep = getattr(request.node, "_interop_rep_call", None)
    return rep is None or rep.failed


@pytest.fixture
def reference_cluster(
    reference_installed: Path, tmp_path: Path, request: pytest.FixtureRequest
) -> Iterator[ReferenceCluster]:
    """A started 3-peer reference cluster (ids "1".."3" on free loopback ports) with an
    elected leader. Every peer is stopped afterwards; on failure the peers' log tails are
    printed (shown by pytest in the teardown section).
    """
    with ReferenceCluster(tmp_path / "reference") as cluster:
        try:
            cluster.wait_for_leader(timeout=20)
            yield cluster
        finally:
            if _failed(request):
                for pid in cluster.run_ids:
                    print(f"----- reference peer {pid} log tail -----")
                    print(cluster.log_tail(pid))
