"""The REST API of a peer (issue #18): topics, messages and transactions over HTTP/JSON,
after CDAP's transactional messaging service, mounted at ``/v1`` on the peer's HTTP
listener (``raftlog.observability``). See docs/rest.md.

Modules: ``app`` (the sub-application and the mount hook), ``topic_routes``,
``message_routes``, ``tx_routes`` (the resources), ``gateway`` (the cluster client behind
them), ``auth`` (bearer tokens), ``names`` (namespaces), ``bodies`` (request parsing),
``errors`` (status codes), ``openapi``, ``settings`` (the ``[rest]`` table).
"""
