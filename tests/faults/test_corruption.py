"""Corruption on one follower (``faults.corruption``): detected, refused with one clear line,
repaired by the documented step; the cluster serves throughout and loses nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from faults.corruption import KINDS, corrupt_follower
from faults.harness import RunOptions, run_schedule
from faults.power import COMPACTING_RAFT, TOPIC_RETENTION_MS


@pytest.mark.parametrize("kind", KINDS)
def test_a_corrupt_follower_is_refused_and_rebuilt(kind: str, tmp_path: Path) -> None:
    options = RunOptions(
        duration=0.0, raft=dict(COMPACTING_RAFT), topic_retention_ms=TOPIC_RETENTION_MS
    )
    result = run_schedule(f"corrupt_{kind}", corrupt_follower(kind), tmp_path, 21, options)
    print(f"{kind}: {result.row()} did={result.did}")
    assert result.did.get("exit_code_3") == 1, f"the damaged peer did not exit 3: {result.did}"
    assert result.did.get("detected") == 1, "no 'corrupt data' line with the recovery"
    assert result.did.get("repaired") == 1
    assert result.report.valid, result.report.summary()
