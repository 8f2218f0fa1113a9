"""Command-line tools (``raftlog-tool``)."""
