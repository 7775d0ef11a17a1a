"""Signing a plan in from the panel: the authorization-code flow with PKCE against a
provider's authorize page and token endpoint, the code pasted back by the admin.
``flow.py`` holds the flow and its services, ``providers.py`` each provider's side,
``api.py`` the REST views; ``docs/flows/plan-sign-in.md`` tells the whole story."""
