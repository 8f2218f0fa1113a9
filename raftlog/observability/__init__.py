"""See inside a running peer: the view the consensus loop publishes, the Prometheus
collector over it and over :mod:`raftlog.metrics`, the health rules and the HTTP listener.

The split keeps the consensus loop free of HTTP: the loop builds one small immutable
:class:`~raftlog.observability.view.PeerView` every ~200 ms and swaps a reference; the
listener (its own thread and asyncio loop) only ever reads the latest one.
"""
