"""What a pasted credential looks like: the prefixes and lengths by which a paste is
told apart (a plan token, a per-token key, an OpenAI key, a Codex JWT).

The platform's checks read them (``subscriptions/tokens.py``,
``subscriptions/codex_credential.py``, ``trinity/services.py``) and so does the
panel's, which catch a wrong paste before it leaves the browser
(``frontend/src/tokens.js``, through ``manage.py panel_tables``): one set of shapes,
so the browser never refuses what the server takes or the other way round. The
server's checks stay authoritative.
"""

from __future__ import annotations

import re
from typing import Final

# A Claude plan's OAuth token (``claude setup-token``) and what follows its prefix.
ANTHROPIC_PLAN_PREFIX: Final = "sk-ant-oat01-"
ANTHROPIC_PLAN_MIN_BODY: Final = 16
# Any Claude OAuth token, whatever its version.
ANTHROPIC_OAUTH_PREFIX: Final = "sk-ant-oat"
# Anything Anthropic issued (OAuth tokens and API keys alike).
ANTHROPIC_PREFIX: Final = "sk-ant-"
# Anthropic's per-token API key, the platform API key.
PLATFORM_API_KEY_PREFIX: Final = "sk-ant-api"
# OpenAI's keys (``sk-proj-…``, ``sk-svcacct-…``, ``sk-…``), and the shortest key taken
# for either provider.
OPENAI_KEY_PREFIX: Final = "sk-"
PLATFORM_KEY_MIN_LENGTH: Final = 20
# A JWT (a Codex plan's access token): three dot-separated base64url parts, the first a
# JSON header, so it starts ``eyJ``.
JWT_PREFIX: Final = "eyJ"
JWT_SHAPE: Final = re.compile(r"^[A-Za-z0-9_\-]+\.[A-Za-z0-9_\-]+\.[A-Za-z0-9_\-]*$")
