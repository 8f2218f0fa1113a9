"""A follower swapped for the other implementation at the same address, under load.

Why: a raftlog leader pipelines AppendEntries (``replication_pipeline``, 4 by default) only to
a follower whose latest answer carried the pipelining mark; a reference follower never marks
its answers and would exit on what a pipelining leader may send it (a new request below what
it already processed; docs/protocol.md §8). The leader cannot know that the process behind
an address changed, only what its answers say. So this test replaces a raftlog follower that
the leader pipelines to with a reference peer (empty data directory, same id and address)
while the reference client keeps committing, then puts the raftlog peer back (its own, now
stale, data directory), again under load. Each time the newcomer must catch up and stay up,
no acknowledged update may be lost or duplicated, and every replica must end identical.
"""

from __future__ import annotations

import contextlib
import time
from pathlib import Path

import pytest
from interop_peers import (
    SLOW_REFERENCE_ELECTIONS,
    BackgroundUpdater,
    MixedCluster,
    log_info_at,
    no_leftover_processes,  # noqa: F401 - an autouse fixture: every peer is stopped
    quiet_ports,
)
from reference import ReferenceCluster, iter_state_data, js_read_log

pytestmark = pytest.mark.timeout(240)

class _Stopping:
    """Stops every reference peer on close (entering a ``ReferenceCluster`` would start
    them at once; this test starts its one peer mid-run)."""

    def __init__(self, reference: ReferenceCluster) -> None:
        self.reference = reference

    def close(self) -> None:
        self.reference.stop()


def _wait(what: str, check: object, timeout: float, alive: object) -> None:
    deadline = time.monotonic() + timeout
    while not check():  # type: ignore[operator]
        alive()  # type: ignore[operator]
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.05)


def test_a_follower_swapped_for_the_other_implementation_under_load(
    reference_installed: Path, tmp_path: Path
) -> None:
    with MixedCluster(tmp_path / "raftlog", ["1", "2", "3"], []) as cluster:
        (pub,) = quiet_ports(1)
        reference = ReferenceCluster(
            tmp_path / "reference",
            peers=cluster.urls,
            pub_urls={"3": f"tcp://127.0.0.1:{pub}"},
            run_ids=["3"],
            ident=cluster.ident,
            options=SLOW_REFERENCE_ELECTIONS,
        )
        url3 = cluster.urls["3"]

        def alive() -> None:
            cluster.check_alive()
            reference.check_alive()

        def caught_up(of: str) -> bool:
            leader = log_info_at(cluster.urls[of], cluster.ident)
            mine = log_info_at(url3, cluster.ident)
            return (
                leader is not None
                and mine is not None
                and mine.commit_index >= leader.commit_index > 0
            )

        with contextlib.closing(_Stopping(reference)), BackgroundUpdater(
            tmp_path / "load", list(cluster.urls.values()), cluster.ident, workers=16, timeout=200
        ) as load:
            # Peer 3 must be a follower throughout: the pair elects before it starts.
            cluster.start("1", "2")
            leader = cluster.wait_leader(timeout=60)
            cluster.start("3")
            load.wait_acked(300, timeout=60)
            _wait("raftlog peer 3 to catch up", lambda: caught_up(leader), 30, alive)

            cluster.kill("3")  # mid-load, while the leader pipelines to it
            reference.start("3")  # same id and address, nothing on disk
            acked = len(load.progress())
            load.wait_acked(acked + 300, timeout=60)
            _wait("reference peer 3 to catch up", lambda: caught_up(leader), 60, alive)
            acked = len(load.progress())
            load.wait_acked(acked + 300, timeout=60)  # and to keep up while it follows
            _wait("reference peer 3 to keep up", lambda: caught_up(leader), 30, alive)

            reference.kill("3")
            cluster.start("3")  # raftlog again, with the data it had before the swap
            acked = len(load.progress())
            load.wait_acked(acked + 300, timeout=60)
            _wait("raftlog peer 3 to catch up again", lambda: caught_up(leader), 60, alive)
            result = load.finish()
            assert cluster.wait_leader() == leader, "the swaps must not cost the leader"

        written = {rec["index"]: bytes.fromhex(rec["data"]) for rec in result["acked"]}
        assert len(written) == len(result["acked"]), "an index was acknowledged twice"
        log = js_read_log(cluster.urls, cluster.ident).run()
        assert log["complete"] is True
        stored = dict(iter_state_data(log["entries"]))
        assert {i: stored.get(i) for i in written} == written
        assert len(set(stored.values())) == len(stored), "an update was committed twice"
        _wait(
            "all three peers to agree",
            lambda: len({
                (i.last_index, i.commit_index) for i in cluster.log_infos().values()
                if i is not None
            }) == 1,
            20,
            alive,
        )
        cluster.stop()
        entries = cluster.read_log_files("1")
        for pid in ("2", "3"):
            assert cluster.read_log_files(pid) == entries, f"peer {pid} differs from peer 1"
