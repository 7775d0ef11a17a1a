"""A sign-in through the test provider over plain HTTP, as a browser would make it."""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

import httpx


def sso_sign_in(platform_url: str, username: str, password: str) -> tuple[httpx.Client, str]:
    """A client that went Trinity -> provider's login -> Trinity's callback, and the
    URL it ended on (the panel, or the panel with ``?sso_error=``). The client keeps
    both sites' cookies: Trinity's session, the provider's."""
    client = httpx.Client(follow_redirects=True, timeout=30)
    login = client.get(f"{platform_url}/oidc/authenticate/")
    assert urlsplit(str(login.url)).path == "/accounts/login/", login.url
    answer = client.post(
        str(login.url),
        data={
            "username": username,
            "password": password,
            "csrfmiddlewaretoken": client.cookies["idp_csrftoken"],
            "next": parse_qs(urlsplit(str(login.url)).query)["next"][0],
        },
    )
    return client, str(answer.url)


def csrf_post(client: httpx.Client, url: str) -> httpx.Response:
    """POST with the CSRF token Trinity's cookie carries (as the panel sends it)."""
    base = url.split("/api/", 1)[0]
    client.get(f"{base}/api/auth/csrf")
    token = next(str(c.value) for c in client.cookies.jar if c.name == "csrftoken")
    return client.post(url, headers={"X-CSRFToken": token}, follow_redirects=False)
