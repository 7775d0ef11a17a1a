"""Read state per user: ``NotificationRead`` replaces ``Notification.read_at``.

A notice that was marked read was read for everyone who could see it; each of them keeps
it read (a row per user who sees it under the rule of ``trinity/notification_inbox.py``
at this migration: admins see every notice, an agent's owner its notices, everyone the
shared plans' alerts that name no agent), so no one's badge changes at the upgrade.
Backwards, a notice read by anyone is read again, at the first read.
"""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models
from django.db.models import Min

BATCH = 1000


def _readers(users, row):
    """The users who saw this notice under the rule at this migration."""
    if row["agent__owner_id"] is not None:
        return users["staff"] | {row["agent__owner_id"]}
    if row["agent_name"] == "" and row["subscription_id"] is not None:
        return users["all"]
    return users["staff"]


def reads_per_user(apps, schema_editor):
    Notification = apps.get_model("trinity", "Notification")
    NotificationRead = apps.get_model("trinity", "NotificationRead")
    User = apps.get_model(*settings.AUTH_USER_MODEL.split("."))
    users = {
        "staff": set(User.objects.filter(is_staff=True).values_list("pk", flat=True)),
        "all": set(User.objects.values_list("pk", flat=True)),
    }
    rows = (
        Notification.objects.filter(read_at__isnull=False)
        .values("pk", "read_at", "agent__owner_id", "agent_name", "subscription_id")
        .order_by("pk")
    )
    batch = []
    for row in rows.iterator(chunk_size=BATCH):
        for user_id in sorted(_readers(users, row)):
            batch.append(
                NotificationRead(notification_id=row["pk"], user_id=user_id, read_at=row["read_at"])
            )
        if len(batch) >= BATCH:
            NotificationRead.objects.bulk_create(batch, ignore_conflicts=True)
            batch = []
    NotificationRead.objects.bulk_create(batch, ignore_conflicts=True)


def read_by_anyone(apps, schema_editor):
    Notification = apps.get_model("trinity", "Notification")
    NotificationRead = apps.get_model("trinity", "NotificationRead")
    first = NotificationRead.objects.values("notification_id").annotate(at=Min("read_at"))
    for row in first.iterator(chunk_size=BATCH):
        Notification.objects.filter(pk=row["notification_id"]).update(read_at=row["at"])


class Migration(migrations.Migration):
    dependencies = [
        ("agents", "0008_alter_agent_runtime"),
        ("trinity", "0008_openai_platform_key"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name="NotificationRead",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("read_at", models.DateTimeField()),
                (
                    "notification",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="reads",
                        to="trinity.notification",
                    ),
                ),
                (
                    "user",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="notification_reads",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
            ],
            options={
                "constraints": [
                    models.UniqueConstraint(
                        fields=("user", "notification"), name="notification_read_once"
                    )
                ],
            },
        ),
        migrations.RunPython(reads_per_user, read_by_anyone),
        migrations.RemoveField(model_name="notification", name="read_at"),
    ]
