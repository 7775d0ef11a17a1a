from __future__ import annotations

import secrets

import factory
from django.contrib.auth.models import User

from agents.models import Agent
from trinity.crypto import Secret


class UserFactory(factory.django.DjangoModelFactory[User]):
    class Meta:
        model = User
        django_get_or_create = ("username",)

    username = factory.Sequence(lambda n: f"user{n}")
    password = factory.django.Password("pw-for-tests-only")


class AgentFactory(factory.django.DjangoModelFactory[Agent]):
    class Meta:
        model = Agent

    name = factory.Sequence(lambda n: f"agent-{n}")
    owner = factory.SubFactory(UserFactory)
    runtime = "claude-code"
    model = "claude-sonnet-4-5"
    shared_secret = factory.LazyFunction(lambda: Secret(secrets.token_urlsafe(32)))
