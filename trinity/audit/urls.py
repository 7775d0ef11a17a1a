from __future__ import annotations

from django.urls import path

from trinity.audit import api

urlpatterns = [
    path("audit", api.AuditListApi.as_view(), name="audit-list"),
    path("audit/export", api.AuditExportApi.as_view(), name="audit-export"),
]
