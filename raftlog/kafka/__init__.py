"""A Kafka-protocol listener per peer (issue #30, docs/kafka.md).

Kafka clients (kcat, librdkafka, kafka-python, aiokafka) produce to and consume from raftlog
topics through it; the listener translates each request into the peer's own topic
operations (publishes go through the normal client path to the leader, fetches read this
peer's applied records). Nothing here imports the listener at package import time:
``raftlog.config`` imports :mod:`raftlog.kafka.settings` only.
"""
