"""The notifications a user may read, whether they have read each, and marking them
read (the inbox's questions).

Visibility follows the agent a notice is about (by its id, never its name); the rule
needs only the notification's own columns and its agent's owner, so it lives beside
the notifications, below the apps that send them. Read state is each user's own
(``NotificationRead``): one user marking a notice read leaves it unread for everyone
else who sees it.
"""

from __future__ import annotations

from datetime import datetime

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db import transaction
from django.db.models import OuterRef, Q, QuerySet, Subquery

from trinity.models import Notification, NotificationRead


def notifications_visible_to(user: AbstractBaseUser | AnonymousUser) -> QuerySet[Notification]:
    """Admins see every notification; others those about their own agents (by the
    agent's id, never its name: a reused name starts clean) and those about a
    subscription of the shared pool that name no agent (a headroom alert). A notice
    about another owner's agent, about an agent since deleted, or about the fleet
    (the key's fleet budget, a provider outage) is the admin's."""
    queryset = Notification.objects.all()
    if getattr(user, "is_staff", False):
        return queryset
    return queryset.filter(
        Q(agent__owner_id=user.pk)
        | Q(agent__isnull=True, agent_name="", subscription_id__isnull=False)
    )


def _reader_id(user: AbstractBaseUser | AnonymousUser) -> int:
    # An anonymous caller (never past the API's permission) has read nothing.
    return int(user.pk) if user.pk is not None else 0


def notifications_with_read_state(
    user: AbstractBaseUser | AnonymousUser, *, read: bool | None = None
) -> QuerySet[Notification]:
    """The notifications ``user`` may read, each annotated with ``read_at``: when this
    user marked it read, None while it is unread for them (one subquery, no join that
    could repeat a row). ``read`` keeps only those this user has (True) or has not
    (False) read."""
    reader = _reader_id(user)
    mine = NotificationRead.objects.filter(notification_id=OuterRef("pk"), user_id=reader)
    queryset = notifications_visible_to(user)
    if read is True:
        queryset = queryset.filter(reads__user_id=reader)  # one row at most: unique
    elif read is False:
        queryset = queryset.exclude(reads__user_id=reader)
    return queryset.annotate(read_at=Subquery(mine.values("read_at")[:1]))


@transaction.atomic
def notifications_mark_read(
    *, user: AbstractBaseUser | AnonymousUser, ids: list[int] | None, now: datetime
) -> int:
    """Mark read, for ``user`` only, the visible notifications still unread for them
    (``ids``, or all); returns how many. Marking one already read changes nothing; a
    concurrent mark of the same notice by the same user counts once in the table."""
    reader = _reader_id(user)
    unread = notifications_visible_to(user).exclude(reads__user_id=reader)
    if ids is not None:
        unread = unread.filter(pk__in=ids)
    pks = list(unread.values_list("pk", flat=True))
    NotificationRead.objects.bulk_create(
        [NotificationRead(notification_id=pk, user_id=reader, read_at=now) for pk in pks],
        ignore_conflicts=True,
        batch_size=1000,
    )
    return len(pks)
