from __future__ import annotations

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "trinity.settings")

application = get_wsgi_application()


def _warn_about_an_unnamed_proxy() -> None:
    """Once per web process, at startup: behind a proxy nobody named, every client
    shares the proxy's address (and its sign-in counts)."""
    import logging

    from django.conf import settings

    from trinity.authentication import proxy_warning

    warning = proxy_warning(https=settings.TRINITY_HTTPS, trusted=settings.TRINITY_TRUSTED_PROXIES)
    if warning:
        logging.getLogger("trinity.wsgi").warning(warning)


_warn_about_an_unnamed_proxy()
