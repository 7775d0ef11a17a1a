from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.contrib.auth.models import User
from django.core.cache import cache
from rest_framework.test import APIClient

from tests.agents.factories import UserFactory


@pytest.fixture(autouse=True)
def _clear_cache() -> Iterator[None]:
    cache.clear()
    yield
    cache.clear()


@pytest.fixture
def owner(db: None) -> User:
    return UserFactory.create(username="owner")


@pytest.fixture
def other_user(db: None) -> User:
    return UserFactory.create(username="other")


@pytest.fixture
def admin_user(db: None) -> User:
    return UserFactory.create(username="admin", is_staff=True, is_superuser=True)


def _client_for(user: User) -> APIClient:
    client = APIClient()
    client.force_login(user)
    return client


@pytest.fixture
def owner_client(owner: User) -> APIClient:
    return _client_for(owner)


@pytest.fixture
def other_client(other_user: User) -> APIClient:
    return _client_for(other_user)


@pytest.fixture
def admin_client_api(admin_user: User) -> APIClient:
    return _client_for(admin_user)


@pytest.fixture
def anon_client() -> APIClient:
    return APIClient()
