"""An out-of-range term on disk (issue #12, finding 1): the start-up check names it and the
offline repair ``raftlog-tool reset-term`` fixes it -- and refuses every unsafe variant."""

from __future__ import annotations

from pathlib import Path

import pytest
from storage_helpers import batch

from raftlog.bounds import MAX_TERM
from raftlog.cli.tool import main
from raftlog.errors import DurableStateOutOfRangeError
from raftlog.rpc.messages import ConfigPayload, Peer
from raftlog.storage.base import HardState
from raftlog.storage.bounds_check import check_durable_bounds
from raftlog.storage.rocks import open_storage

FORGED = 2**53 - 1
CONFIG = ConfigPayload((Peer("p1", "tcp://127.0.0.1:1"),))


def make_dir(tmp_path: Path, term: int, voted_for: str | None = "p2") -> Path:
    path = tmp_path / "peer"
    log, hard_state, snapshots = open_storage(path)
    log.append(1, batch(1, 1, 3))
    log.append(4, batch(4, 2, 2))  # last log term 2
    hard_state.save(HardState(term, voted_for, CONFIG, 0, last_applied=5))
    for store in (log, hard_state, snapshots):
        store.close()
    return path


def stored(path: Path) -> HardState:
    log, hard_state, snapshots = open_storage(path)
    try:
        return hard_state.load()
    finally:
        for store in (log, hard_state, snapshots):
            store.close()


def test_start_up_check_names_the_value_and_the_repair(tmp_path: Path) -> None:
    path = make_dir(tmp_path, FORGED)
    log, hard_state, snapshots = open_storage(path)
    try:
        with pytest.raises(DurableStateOutOfRangeError) as caught:
            check_durable_bounds(path, hard_state.load(), log)
        check_durable_bounds(path, HardState(MAX_TERM), log)  # the ceiling itself is fine
    finally:
        for store in (log, hard_state, snapshots):
            store.close()
    text = str(caught.value)
    assert str(FORGED) in text and "raftlog-tool reset-term" in text and "\n" not in text


def test_reset_term_repairs_a_stopped_peer(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = make_dir(tmp_path, FORGED)
    assert main(["reset-term", str(path), "--term", "7"]) == 0
    state = stored(path)
    assert (state.current_term, state.voted_for) == (7, None)
    assert (state.config, state.last_applied) == (CONFIG, 5)  # nothing else changes
    assert "-> 7" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("term", "new_term", "why"),
    [
        (FORGED, 2, "above the log's last term"),  # not above the last log term 2
        (FORGED, MAX_TERM + 1, "within 1.."),
        (FORGED, 0, "within 1.."),
        (9, 7, "lowering it is never needed"),  # an in-range term is never lowered
    ],
)
def test_reset_term_refuses_unsafe_values(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], term: int, new_term: int, why: str
) -> None:
    path = make_dir(tmp_path, term)
    assert main(["reset-term", str(path), "--term", str(new_term)]) == 2
    assert why in capsys.readouterr().err
    assert stored(path).current_term == term


def test_reset_term_refuses_while_the_peer_holds_the_store(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = make_dir(tmp_path, FORGED)
    log, hard_state, snapshots = open_storage(path)  # what a running peer holds
    try:
        assert main(["reset-term", str(path), "--term", "7"]) == 2
        assert "is the peer still running?" in capsys.readouterr().err
    finally:
        for store in (log, hard_state, snapshots):
            store.close()
    assert stored(path).current_term == FORGED
