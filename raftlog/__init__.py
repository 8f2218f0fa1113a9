"""raftlog: a Raft-replicated, fsync-durable log cluster speaking the ØMQ RAFT wire protocol."""

__version__ = "0.1.0"
