"""Signing a plan in from the panel: the authorization-code flow with PKCE against a
provider's authorize page and token endpoint, the code pasted back by the admin; or
ChatGPT's device code, polled. ``flow.py`` holds the pasted flow and the storing both
share, ``device.py`` the device-code flow, ``providers.py`` each provider's side,
``api.py`` the REST views; ``docs/flows/plan-sign-in.md`` tells the whole story."""
