"""REST views of a plan's sign-in from the panel (admin only): start it, then paste
the code back; or, for ChatGPT, start a device-code sign-in and poll it. Thin:
``flow.py`` and ``device.py`` do the work."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from subscriptions.api import SubscriptionOutput
from subscriptions.plan_sign_in.device import plan_device_sign_in_poll, plan_device_sign_in_start
from subscriptions.plan_sign_in.flow import plan_sign_in_finish, plan_sign_in_start
from subscriptions.plan_sign_in.providers import SIGN_IN_CHOICES, SignInProvider
from subscriptions.selectors import subscription_get_visible
from trinity import clock
from trinity.api import IsAdmin, name_field
from trinity.schema import CONFLICT, ErrorOutput

PROVIDER_DOWN = OpenApiResponse(
    ErrorOutput, description="the provider's sign-in service did not answer usefully"
)


def _admin_id(request: Request) -> int:
    user_id = request.user.pk
    assert user_id is not None  # noqa: S101 - IsAdmin lets only a signed-in admin in
    return int(user_id)


class SignInStartOutput(serializers.Serializer[Any]):
    flow = serializers.CharField(help_text="the sign-in's id: paste the code back under it")
    provider = serializers.ChoiceField(choices=SIGN_IN_CHOICES)
    authorize_url = serializers.CharField(
        help_text="the provider's sign-in page: open it, sign in, copy the code it shows"
    )
    expires_at = serializers.DateTimeField(help_text="the code must be pasted back before this")


class PlanSignInStartApi(APIView):
    """Start signing a plan in: the provider's authorize URL (PKCE; the verifier stays
    on the server, bound to the admin who asked)."""

    permission_classes = [IsAdmin]

    class Input(serializers.Serializer[Any]):
        provider = serializers.ChoiceField(choices=SIGN_IN_CHOICES)
        name = name_field(max_length=100)
        plan_type = serializers.CharField(max_length=30)

    @extend_schema(request=Input, responses={201: SignInStartOutput})
    def post(self, request: Request) -> Response:
        data = self.Input(data=request.data)
        data.is_valid(raise_exception=True)
        started = plan_sign_in_start(
            user_id=_admin_id(request),
            provider=SignInProvider(data.validated_data["provider"]),
            name=data.validated_data["name"],
            plan_type=data.validated_data["plan_type"],
            now=clock.now(),
        )
        return Response(SignInStartOutput(started).data, status=status.HTTP_201_CREATED)


class PlanSignInCodeApi(APIView):
    """Finish a sign-in: the pasted code is redeemed and the plan registered (or, for
    an existing name, signed in again). The answer is the plan, never a token."""

    permission_classes = [IsAdmin]

    # Not "code": an error answer's "code" is the error's kind (trinity.api), so a
    # field of that name could not carry its messages.
    class Input(serializers.Serializer[Any]):
        pasted = serializers.CharField(
            max_length=4096,
            trim_whitespace=True,
            help_text="what the provider's page showed: Claude's code#state, or the callback "
            "address ChatGPT's sign-in landed on",
        )

    @extend_schema(
        request=Input,
        responses={
            200: SubscriptionOutput,
            201: SubscriptionOutput,
            409: CONFLICT,
            502: PROVIDER_DOWN,
        },
    )
    def post(self, request: Request, flow: str) -> Response:
        data = self.Input(data=request.data)
        data.is_valid(raise_exception=True)
        subscription, created = plan_sign_in_finish(
            user_id=_admin_id(request),
            flow=flow,
            pasted=data.validated_data["pasted"],
            now=clock.now(),
        )
        subscription = subscription_get_visible(user=request.user, pk=subscription.pk)
        return Response(
            SubscriptionOutput(subscription).data,
            status=status.HTTP_201_CREATED if created else status.HTTP_200_OK,
        )


class DeviceSignInStartOutput(serializers.Serializer[Any]):
    flow = serializers.CharField(help_text="the sign-in's id: poll it until the plan is signed in")
    user_code = serializers.CharField(
        help_text="the code to type on the provider's device page (not a secret of the plan)"
    )
    verification_url = serializers.CharField(help_text="the provider's device page")
    interval = serializers.IntegerField(help_text="seconds between polls, as the provider asks")
    expires_at = serializers.DateTimeField(help_text="the code must be entered before this")


class DeviceSignInPendingOutput(serializers.Serializer[Any]):
    status = serializers.CharField(help_text='"pending": the code was not entered yet')


SIGN_IN_ENDED = OpenApiResponse(
    ErrorOutput,
    description="the device code expired, or the provider ended the sign-in: start again",
)


class PlanDeviceSignInStartApi(APIView):
    """Start signing a ChatGPT plan in with a device code (the Codex CLI's
    ``--device-auth``): the user code to type on the provider's device page. The
    provider's device auth id stays on the server, bound to the admin who asked."""

    permission_classes = [IsAdmin]

    class Input(serializers.Serializer[Any]):
        name = name_field(max_length=100)
        plan_type = serializers.CharField(max_length=30)

    @extend_schema(request=Input, responses={201: DeviceSignInStartOutput, 502: PROVIDER_DOWN})
    def post(self, request: Request) -> Response:
        data = self.Input(data=request.data)
        data.is_valid(raise_exception=True)
        started = plan_device_sign_in_start(
            user_id=_admin_id(request),
            name=data.validated_data["name"],
            plan_type=data.validated_data["plan_type"],
            now=clock.now(),
        )
        return Response(DeviceSignInStartOutput(started).data, status=status.HTTP_201_CREATED)


class PlanDeviceSignInPollApi(APIView):
    """Ask the provider once whether the device code was entered: 202 while not;
    then the plan is registered (or, for an existing name, signed in again) and is
    the answer, never a token."""

    permission_classes = [IsAdmin]

    @extend_schema(
        request=None,
        responses={
            200: SubscriptionOutput,
            201: SubscriptionOutput,
            202: DeviceSignInPendingOutput,
            409: CONFLICT,
            410: SIGN_IN_ENDED,
            502: PROVIDER_DOWN,
        },
    )
    def post(self, request: Request, flow: str) -> Response:
        registered = plan_device_sign_in_poll(
            user_id=_admin_id(request), flow=flow, now=clock.now()
        )
        if registered is None:
            pending = DeviceSignInPendingOutput({"status": "pending"}).data
            return Response(pending, status=status.HTTP_202_ACCEPTED)
        subscription, created = registered
        subscription = subscription_get_visible(user=request.user, pk=subscription.pk)
        return Response(
            SubscriptionOutput(subscription).data,
            status=status.HTTP_201_CREATED if created else status.HTTP_200_OK,
        )
