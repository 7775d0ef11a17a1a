"""The gateway's serving process: a raw ASGI app on uvicorn (``python -m gateway``).

No Django request cycle per proxied request: the platform's rows are read through
in-memory caches (keys, a session's routing evidence) refreshed from the database in
a thread pool, and the planner decides every request's credential
(``gateway/server/routing.py``). See ``docs/flows/gateway.md``.
"""
