"""trinity/middleware.py: an event stream's database connection goes back when its
view returns, not when the stream ends; any other answer keeps Django's own handling.

The test client runs the view in this thread, so the view's connection is the test's:
what it sees after the response is returned (its body not read yet) is what a stream
would hold for its whole life."""

from __future__ import annotations

import pytest
from django.db import connection, transaction
from django.http import StreamingHttpResponse
from django.test import Client

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.urls("tests.trinity.stream_urls"),
]


def test_an_event_stream_releases_its_connection_before_its_body_is_read() -> None:
    response = Client().get("/stream")
    assert isinstance(response, StreamingHttpResponse)
    assert connection.connection is None
    assert b"event: turn" in b"".join(response.streaming_content)


def test_a_plain_answer_keeps_its_connection() -> None:
    response = Client().get("/plain")
    assert response.json() == {"users": False}
    assert connection.connection is not None


def test_a_connection_inside_a_transaction_is_left_open() -> None:
    with transaction.atomic():
        response = Client().get("/stream")
        assert response.streaming
        assert connection.connection is not None
        assert connection.in_atomic_block
