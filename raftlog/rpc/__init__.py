"""The ØMQ RAFT wire format: typed messages (``messages``) and pure frame codecs."""
