"""Transport security: CURVE keys, the access policy (roles, topic ACLs) and the ZAP handler.

Plaintext (ZeroMQ's NULL mechanism) stays the default — it is all the reference ``zmq-raft``
speaks, so mixed clusters need it; a cluster file's ``[security] curve = true`` turns CURVE on
for every socket (see ``docs/security.md``).
"""
