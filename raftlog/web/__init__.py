"""HTTP plumbing shared by the peer's HTTP listener (``raftlog.observability``) and the REST
API (``raftlog.rest``): the error type and its JSON body, token authentication, and the
application keys the listener sets for the routes (issue #26: observability no longer
imports the REST package for them)."""
