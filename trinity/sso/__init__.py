"""Single sign-on through the team's OpenID Connect provider (docs/flows/sso.md).

``config`` reads the settings and says whether passwords may be used, ``provider``
reads the provider's discovery document, ``claims`` holds the pure rules over an ID
token's claims, ``services`` turns a verified sign-in into an account, ``backends`` and
``views`` wire them into Django and mozilla-django-oidc.
"""
