"""The gateway: the team's own CLIs and SDKs served by the subscription pool.

A Django app for what the platform keeps (gateway keys, sessions, usage) and, in
``gateway/server/``, the fast process that serves ``/v1/messages`` and
``/v1/responses`` (``python -m gateway``). See ``docs/flows/gateway.md``.
"""
