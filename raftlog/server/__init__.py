"""The ``raftlog-peer`` service: thin I/O drivers around the pure consensus core."""
