"""Before the provider starts: its tables, and Trinity registered as a confidential
client (``python -m tests.sso.idp.seed``, settings from the environment)."""

from __future__ import annotations

import os

import django


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.sso.idp.settings")
    django.setup()
    from django.core.management import call_command
    from oauth2_provider.models import Application

    call_command("migrate", verbosity=0, interactive=False)
    Application.objects.update_or_create(
        client_id=os.environ["IDP_CLIENT_ID"],
        defaults={
            "name": "Trinity",
            "client_secret": os.environ["IDP_CLIENT_SECRET"],
            "client_type": Application.CLIENT_CONFIDENTIAL,
            "authorization_grant_type": Application.GRANT_AUTHORIZATION_CODE,
            "redirect_uris": os.environ["IDP_REDIRECT_URI"],
            "post_logout_redirect_uris": os.environ["IDP_POST_LOGOUT_REDIRECT_URI"],
            "algorithm": Application.RS256_ALGORITHM,
            "skip_authorization": True,
        },
    )


if __name__ == "__main__":
    main()
