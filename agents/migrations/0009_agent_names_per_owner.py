"""Agent names are unique per owner; runtime resources are named by ``runtime_key``.

Every existing agent's key is its name (names were unique across owners until now), so
a running server keeps its home, socket, work area and container. Backwards, names
must be unique again: it fails while two owners share one.
"""

from django.conf import settings
from django.db import migrations, models
from django.db.models import F


def keys_are_names(apps, schema_editor):
    Agent = apps.get_model("agents", "Agent")
    Agent.objects.update(runtime_key=F("name"))


class Migration(migrations.Migration):
    dependencies = [
        ("agents", "0008_alter_agent_runtime"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddField(
            model_name="agent",
            name="runtime_key",
            # No index until it is filled and unique (the unique one comes below).
            field=models.SlugField(max_length=100, null=True, editable=False, db_index=False),
        ),
        migrations.RunPython(keys_are_names, migrations.RunPython.noop),
        migrations.AlterField(
            model_name="agent",
            name="runtime_key",
            field=models.SlugField(max_length=100, unique=True, editable=False),
        ),
        migrations.AlterField(
            model_name="agent",
            name="name",
            field=models.SlugField(max_length=100),
        ),
        migrations.AddConstraint(
            model_name="agent",
            constraint=models.UniqueConstraint(
                fields=("owner", "name"), name="agent_name_per_owner"
            ),
        ),
        migrations.AlterModelOptions(name="agent", options={"ordering": ["name", "id"]}),
    ]
