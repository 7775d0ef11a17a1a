"""What the agent server and the platform share beyond the JSON shapes: standard
library only, importing nothing of either side.

- ``trinity_contract.errors``: the typed error codes an agent server answers with and
  the HTTP status of each;
- ``trinity_contract.refusal_text``: the refusal-text patterns both classifiers read
  (the agent server's, of the CLI's output; the platform's, of an answer's detail);
- ``trinity_contract.proof``: the HMAC health proof an agent server answers and the
  platform checks before it sends anything;
- ``trinity_contract.redaction``: the ``Redactor`` that keeps secrets out of logs and
  error texts (the platform's process registry, ``platform_redactor``; each agent
  server builds its own), and the log handler's ``RedactingFilter``;
- ``trinity_contract.log_json``: the turn's log context and the JSON line formatter;
  ``trinity_contract.log_lines``: one record, one line.

The agent server (``agent_server/``, which imports nothing from the Django side) and
the platform (``agents/``, ``subscriptions/``) both import these, so a code or a
pattern cannot drift between them; ``tests/trinity_contract/test_shared_contract.py``
pins that both sides hold the very same objects.
"""

from __future__ import annotations
