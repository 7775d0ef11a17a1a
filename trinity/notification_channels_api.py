"""Notification channels over REST (admins only): CRUD, "send test", recent deliveries.

The webhook URL is write-only: answers carry its host and last 4 characters, never
the URL, and a refused URL's error message never echoes it.
"""

from __future__ import annotations

from typing import Any

from django.utils.cache import add_never_cache_headers
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from trinity import clock
from trinity import notification_channels as services
from trinity.api import IsAdmin, name_field
from trinity.models import (
    Notification,
    NotificationChannel,
    NotificationDelivery,
    NotificationDeliveryAttempt,
)


class ChannelOutput(serializers.ModelSerializer[NotificationChannel]):
    class Meta:
        model = NotificationChannel
        fields = [
            "id",
            "name",
            "kind",
            "url_host",
            "url_fingerprint",
            "min_level",
            "kinds",
            "enabled",
            "created_at",
            "updated_at",
        ]


class AttemptOutput(serializers.ModelSerializer[NotificationDeliveryAttempt]):
    class Meta:
        model = NotificationDeliveryAttempt
        fields = ["number", "at", "status_code", "error", "delivered", "retry_in_seconds"]


class DeliveryOutput(serializers.ModelSerializer[NotificationDelivery]):
    notification_kind = serializers.SerializerMethodField()
    notification_title = serializers.SerializerMethodField()
    attempt_log = AttemptOutput(many=True, read_only=True)

    class Meta:
        model = NotificationDelivery
        fields = [
            "id",
            "notification",
            "notification_kind",
            "notification_title",
            "status",
            "attempts",
            "next_attempt_at",
            "created_at",
            "finished_at",
            "attempt_log",
        ]

    def get_notification_kind(self, obj: NotificationDelivery) -> str:
        return obj.notification.kind if obj.notification else services.TEST_KIND

    def get_notification_title(self, obj: NotificationDelivery) -> str:
        return obj.notification.title if obj.notification else "Test notification"


def _kinds_field() -> serializers.ListField:
    return serializers.ListField(
        child=serializers.CharField(max_length=50), max_length=50, required=False
    )


def _no_store(response: Response) -> Response:
    # The request carried a webhook URL: no proxy or browser keeps the exchange.
    add_never_cache_headers(response)
    return response


class ChannelListApi(APIView):
    """GET every notification channel; POST ``{name, kind, url, min_level?, kinds?,
    enabled?}`` to add one. ``kinds`` empty means every kind."""

    permission_classes = [IsAdmin]

    class Input(serializers.Serializer[Any]):
        name = name_field(max_length=100)
        kind = serializers.ChoiceField(choices=NotificationChannel.Kind.choices)
        url = serializers.CharField(write_only=True, max_length=services.MAX_URL_LENGTH + 100)
        min_level = serializers.ChoiceField(
            choices=Notification.Level.choices, default=Notification.Level.WARNING
        )
        kinds = _kinds_field()
        enabled = serializers.BooleanField(default=True)

    @extend_schema(responses=ChannelOutput(many=True))
    def get(self, request: Request) -> Response:
        return Response(ChannelOutput(services.notification_channels_list(), many=True).data)

    @extend_schema(request=Input, responses={201: ChannelOutput})
    def post(self, request: Request) -> Response:
        data = self.Input(data=request.data)
        data.is_valid(raise_exception=True)
        channel = services.notification_channel_create(**data.validated_data, now=clock.now())
        return _no_store(Response(ChannelOutput(channel).data, status=status.HTTP_201_CREATED))


class ChannelDetailApi(APIView):
    """GET, PATCH (any field; ``url`` replaces the URL) or DELETE one channel."""

    permission_classes = [IsAdmin]

    class Input(serializers.Serializer[Any]):
        name = name_field(max_length=100, required=False)
        kind = serializers.ChoiceField(choices=NotificationChannel.Kind.choices, required=False)
        url = serializers.CharField(
            write_only=True, max_length=services.MAX_URL_LENGTH + 100, required=False
        )
        min_level = serializers.ChoiceField(choices=Notification.Level.choices, required=False)
        kinds = _kinds_field()
        enabled = serializers.BooleanField(required=False)

    @extend_schema(responses=ChannelOutput)
    def get(self, request: Request, pk: int) -> Response:
        return Response(ChannelOutput(services.notification_channel_get(pk=pk)).data)

    @extend_schema(request=Input, responses=ChannelOutput)
    def patch(self, request: Request, pk: int) -> Response:
        channel = services.notification_channel_get(pk=pk)
        data = self.Input(data=request.data)
        data.is_valid(raise_exception=True)
        channel = services.notification_channel_update(
            channel=channel, now=clock.now(), **data.validated_data
        )
        return _no_store(Response(ChannelOutput(channel).data))

    @extend_schema(responses={204: None})
    def delete(self, request: Request, pk: int) -> Response:
        services.notification_channel_delete(channel=services.notification_channel_get(pk=pk))
        return Response(status=status.HTTP_204_NO_CONTENT)


class ChannelTestApi(APIView):
    """POST: send a test message to the channel now, once, and say what it answered."""

    permission_classes = [IsAdmin]

    @extend_schema(request=None, responses=AttemptOutput)
    def post(self, request: Request, pk: int) -> Response:
        channel = services.notification_channel_get(pk=pk)
        attempt = services.channel_test_send(channel=channel, now=clock.now())
        return Response(AttemptOutput(attempt).data)


class ChannelDeliveriesApi(APIView):
    """GET the channel's latest 50 deliveries, newest first, with every attempt."""

    permission_classes = [IsAdmin]

    @extend_schema(responses=DeliveryOutput(many=True))
    def get(self, request: Request, pk: int) -> Response:
        channel = services.notification_channel_get(pk=pk)
        deliveries = services.channel_deliveries_list(channel=channel)
        return Response(DeliveryOutput(deliveries, many=True).data)
