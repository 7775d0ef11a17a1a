from __future__ import annotations

from django.conf import settings
from django.db import models


class SsoIdentity(models.Model):
    """An account's identity at the provider: the issuer and the subject (``sub``).

    The subject, not the name, is the account: a person renamed at the provider signs
    in to the same account, and a new person who takes an old name gets a new one.
    """

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="sso_identities"
    )
    issuer = models.CharField(max_length=255)
    subject = models.CharField(max_length=255)
    created_at = models.DateTimeField()
    last_sign_in_at = models.DateTimeField()

    class Meta:
        verbose_name = "SSO identity"
        verbose_name_plural = "SSO identities"
        constraints = [
            models.UniqueConstraint(fields=["issuer", "subject"], name="sso_identity_once")
        ]

    def __str__(self) -> str:
        return f"{self.subject} at {self.issuer}"
