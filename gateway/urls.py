from __future__ import annotations

from django.urls import path

from gateway import api

urlpatterns = [
    path("gateway/keys", api.GatewayKeyListApi.as_view(), name="gateway-key-list"),
    path("gateway/keys/<int:pk>", api.GatewayKeyDetailApi.as_view(), name="gateway-key-detail"),
    path("gateway/usage", api.GatewayUsageApi.as_view(), name="gateway-usage"),
    path("gateway/streams", api.GatewayStreamsApi.as_view(), name="gateway-streams"),
    path("gateway/catalog", api.GatewayCatalogApi.as_view(), name="gateway-catalog"),
]
