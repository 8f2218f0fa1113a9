"""The client's view of its connections (socket monitor events) and the diagnosis it gives
when a call fails: pure logic, plain values, no sockets."""

from __future__ import annotations

import zmq

from raftlog.client.dealer import AUTH_REQUIRED, CLOSED_IN_HANDSHAKE, ConnectionState
from raftlog.client.report import ALL_REFUSED, NO_ANSWER, NO_CONNECTION, AttemptLog, diagnose


def refused(since: float) -> ConnectionState:
    state = ConnectionState()
    state.on_event(zmq.EVENT_CONNECT_DELAYED, since)
    state.on_event(zmq.EVENT_CLOSED, since)
    state.on_event(zmq.EVENT_CONNECT_RETRIED, since)
    return state


def test_refusals_count_from_the_first_retry_until_a_connection() -> None:
    state = refused(10.0)
    state.on_event(zmq.EVENT_CONNECT_RETRIED, 10.5)
    assert state.refusals == 2 and state.refusing_for(11.0) == 1.0
    state.on_event(zmq.EVENT_CONNECTED, 11.2)
    assert state.connected and state.refusing_for(12.0) is None


def test_a_lost_connection_refusing_again_is_refused_from_then_on() -> None:
    state = ConnectionState()
    state.on_event(zmq.EVENT_CONNECTED, 1.0)
    state.on_event(zmq.EVENT_HANDSHAKE_SUCCEEDED, 1.0)
    state.on_event(zmq.EVENT_DISCONNECTED, 5.0)
    assert not state.connected and state.refusing_for(5.5) is None  # not yet retried
    state.on_event(zmq.EVENT_CONNECT_RETRIED, 5.1)
    assert state.ever_connected and state.refusing_for(6.1) == 1.0


def test_connect_delayed_alone_is_not_a_refusal() -> None:
    state = ConnectionState()
    state.on_event(zmq.EVENT_CONNECT_DELAYED, 1.0)  # a slow or filtered host: no verdict
    assert state.refusing_for(100.0) is None


def test_diagnosis_names_the_likely_cause() -> None:
    connected = ConnectionState()
    connected.on_event(zmq.EVENT_CONNECTED, 0.0)
    assert diagnose(["no response", "no response"], [connected, connected]) == NO_ANSWER
    assert diagnose(["refused"], [refused(0.0), refused(0.0)]) == ALL_REFUSED
    assert diagnose(["no response"], [connected, refused(0.0)]) == NO_ANSWER
    assert diagnose(["unreachable"], [ConnectionState(), None]) == NO_CONNECTION
    assert diagnose(["not leader (no leader known)"], [connected]) is None  # someone answered


def test_the_report_covers_the_failing_call_only() -> None:
    log = AttemptLog()
    log.note(1.0, "tcp://a:1", "leader")  # an earlier call, answered
    log.note(5.0, "tcp://a:1", "no response")
    log.note(5.5, "tcp://a:1", "no response")
    connected = ConnectionState()
    connected.on_event(zmq.EVENT_CONNECTED, 0.0)
    error = log.unavailable(
        started=4.0,
        now=6.0,
        what="no leader found",
        urls=["tcp://a:1"],
        states={"tcp://a:1": connected},
    )
    text = str(error)
    assert text.startswith(NO_ANSWER)
    assert "no leader found after 2.0s" in text and "tcp://a:1: no response x2" in text


def test_a_plaintext_client_is_told_the_cluster_needs_curve() -> None:
    """Issue #33 item 3: mechanism mismatch, or a connection dropped mid-handshake (a reset
    can swallow the greeting that would have said so), both mean "authentication required"
    to a plaintext client."""
    for failure in (zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL, zmq.EVENT_DISCONNECTED):
        states = []
        for _ in range(2):
            state = ConnectionState(curve=False)
            state.on_event(zmq.EVENT_CONNECTED, 1.0)
            state.on_event(failure, 1.5)
            assert state.refusing_for(2.5) == 1.0
            states.append(state)
        assert diagnose(["refused"], states) == AUTH_REQUIRED


def test_a_curve_client_dropped_mid_handshake_hears_authentication_failed() -> None:
    state = ConnectionState(curve=True)
    state.on_event(zmq.EVENT_CONNECTED, 1.0)
    state.on_event(zmq.EVENT_DISCONNECTED, 1.01)
    assert state.auth_error == CLOSED_IN_HANDSHAKE
    assert (diagnose(["refused"], [state]) or "").startswith("authentication failed")
