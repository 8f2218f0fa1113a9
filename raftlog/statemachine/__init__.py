"""State machines applied by a peer: the protocol (``base``) and the BroadcastStateMachine."""

from raftlog.statemachine.base import StateMachine
from raftlog.statemachine.broadcast import BroadcastStateMachine

__all__ = ["BroadcastStateMachine", "StateMachine"]
