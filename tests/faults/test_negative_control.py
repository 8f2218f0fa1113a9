"""Negative control with real processes: a deliberately broken peer must be caught.

All peers run with a test-only bug switch (``RAFTLOG_FAILPOINTS=<point>=skip``, accepted only
with ``RAFTLOG_FAILPOINTS_UNSAFE=lose-acknowledged-writes``). With ``sync=skip`` every RocksDB
write stays in memory, and the all-peers-crash schedule (kill -9) must find lost
acknowledged writes. The other switches each leave out one fsync — the log's, the hard
state's, a snapshot file's, a snapshot's directory's — which only a power cut on the lazy
file system can reveal. Each must be caught: the proof that a green schedule means something.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from faults.harness import run_schedule
from faults.power import RecoveryFailedError, VoteForgottenError
from faults.schedules import SCHEDULES


def test_checker_catches_a_peer_that_acks_before_fsync(tmp_path: Path) -> None:
    schedule = SCHEDULES["all_peers_crash"]
    options = schedule.run_options(4.0)
    options.failpoints = {"*": "sync=skip"}
    result = run_schedule("all_peers_crash+ack_before_fsync", schedule.fault, tmp_path, 7, options)
    assert result.did.get("crashes", 0) >= 1
    report = result.report
    assert not report.valid
    assert report.count("lost") > 0, report.summary()


# -- power cuts: one skipped fsync each, caught by a power-cut schedule -------------------
CONTROLS = {
    # switch: (schedule, seconds)
    "log_sync": ("power_cut_all", 4.0),
    "hard_state_sync": ("power_cut_after_vote", 2.0),
    "snapshot_sync": ("power_cut_compaction", 2.0),
    "snapshot_dir_sync": ("power_cut_compaction", 2.0),
}


SEEDS = (11, 12, 13)
"""A run catches a skipped fsync only if the cut falls while an acknowledged write is still
unsynced, and some later fsync (the hard state's, the applied mark's: the same write-ahead
log) can sync it first; on a loaded machine, with few writes, one run once saw nothing
(61 writes, all durable by chance). A broken checker misses in every run; a control that
must catch in one of three seeds still fails then."""


@pytest.mark.parametrize("switch", list(CONTROLS))
def test_power_cut_catches_a_skipped_fsync(switch: str, tmp_path: Path) -> None:
    """With one fsync left out on every peer (``<switch>=skip``), the schedule must catch
    it: acknowledged writes lost or divergent, a peer that cannot come back from the cut, a
    vote forgotten, or peers that refuse to converge because a leader that lost entries tried
    to overwrite what they had committed (``truncation_refused``). Each of these writes still
    reaches the page cache, so ``kill -9`` alone would see nothing: only the lazy file
    system's power cut can. Up to three seeds (:data:`SEEDS`) until one catches it."""
    missed: list[str] = []
    for seed in SEEDS:
        caught = _caught(switch, tmp_path / f"seed-{seed}", seed)
        if caught is None:
            return
        missed.append(f"seed {seed}: {caught}")
    raise AssertionError(f"{switch}=skip went unnoticed: {missed}")


def _caught(switch: str, where: Path, seed: int) -> str | None:
    """One run of the switch's schedule: None if it caught the skipped fsync, else what it
    saw."""
    name, seconds = CONTROLS[switch]
    schedule = SCHEDULES[name]
    options = schedule.run_options(seconds)
    options.converge_timeout = 20.0
    # A peer refusing to let a leader overwrite entries it had committed is already the
    # proof (Raft never asks that of a correct cluster): stop waiting for a convergence
    # that cannot come (it cost this control 20 s of every suite run that took this path).
    options.converge_give_up = lambda: _refusal(where)
    options.failpoints = {"*": f"{switch}=skip"}
    where.mkdir()
    try:
        result = run_schedule(f"{name}+{switch}=skip", schedule.fault, where, seed, options)
    except (RecoveryFailedError, VoteForgottenError) as exc:
        print(f"{switch}=skip caught: {exc}")
        return None
    except AssertionError as exc:
        refused = _refusal(where)
        assert "to converge" in str(exc) and refused, exc
        print(f"{switch}=skip caught: no convergence, {refused}")
        return None
    print(f"{switch}=skip: {result.row()} did={result.did}")
    assert result.did.get("power_cuts", 0) >= 1
    return None if not result.report.valid else result.report.summary()


def _refusal(logs: Path) -> str | None:
    """Which peer logs (if any) say ``truncation_refused``."""
    refused = sorted(p.name for p in logs.glob("*.log") if "truncation_refused" in p.read_text())
    return f"truncation_refused on {', '.join(refused)}" if refused else None
