from __future__ import annotations

from django import template

from trinity.sso.config import START_PATH, provider_name, sso_enabled

register = template.Library()


@register.simple_tag
def sso_sign_in() -> dict[str, str] | None:
    """The provider's sign-in for a login page: ``{label, start_url}``, None while off."""
    if not sso_enabled():
        return None
    return {"label": provider_name(), "start_url": START_PATH}
