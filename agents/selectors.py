"""Which agents a user sees, and which agent a name means for them.

Names are unique per owner, not across owners: "bot" is whichever bot the caller may
address. An operator sees and addresses only their own; a name another operator uses
is, to them, exactly a free name (404 on a read, 201 on a create), so names cannot be
enumerated. An admin sees every agent and addresses their own first, else the only
agent of that name, else gets ``Ambiguous`` (409) naming how to pick one
(``?owner=<username>``).
"""

from __future__ import annotations

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db.models import QuerySet

from agents.models import Agent
from trinity.errors import Ambiguous, NotFound


def agents_visible_to(user: AbstractBaseUser | AnonymousUser) -> QuerySet[Agent]:
    """Admins see every agent; everyone else sees the agents they own."""
    queryset = Agent.objects.select_related("subscription", "owner")
    if getattr(user, "is_staff", False):
        return queryset
    return queryset.filter(owner_id=user.pk)


def agents_named(
    *, user: AbstractBaseUser | AnonymousUser, name: str, owner: str | None = None
) -> QuerySet[Agent]:
    """The agents ``name`` can mean for ``user``: an operator's own (none when
    ``owner`` names someone else); for an admin, ``owner``'s when given, else their
    own when they have one, else every agent of that name (a list filter shows them
    all; ``agent_get_visible`` refuses to guess between them)."""
    queryset = Agent.objects.filter(name=name)
    if not getattr(user, "is_staff", False):
        if owner is not None and owner != getattr(user, "username", None):
            return queryset.none()
        return queryset.filter(owner_id=user.pk)
    if owner is not None:
        return queryset.filter(owner__username=owner)
    if queryset.filter(owner_id=user.pk).exists():
        return queryset.filter(owner_id=user.pk)
    return queryset


def agent_get_visible(
    *, user: AbstractBaseUser | AnonymousUser, name: str, owner: str | None = None
) -> Agent:
    """The one agent ``name`` (and ``owner``, when given) means for ``user``.

    Raises NotFound when there is none the user may see (the same answer whether
    another operator has an agent of that name or nobody does), and, for an admin
    only, Ambiguous when several owners' agents carry the name and none is the
    admin's. One query for an operator (the turn path) and for an admin naming the
    owner; one more for an admin who does not.
    """
    if not getattr(user, "is_staff", False) or owner is not None:
        # The owner joined in the same query: a turn's answer names it (agent_owner).
        named = agents_named(user=user, name=name, owner=owner)
        found = list(named.select_related("subscription", "owner"))
    else:
        # The admin's own first, else the only one: every agent of the name at once.
        every = list(Agent.objects.filter(name=name).select_related("subscription", "owner")[:100])
        own = [a for a in every if a.owner_id == user.pk]
        found = own or every
    return agent_only(found, name=name, pick="add ?owner=<username> to pick one")


def agent_only(found: list[Agent], *, name: str, pick: str) -> Agent:
    """The one agent of ``found`` (the agents ``name`` may mean). NotFound when there
    is none; Ambiguous, naming their owners and how to ``pick`` one, when several
    owners' agents carry the name (their ``owner`` loaded)."""
    if not found:
        raise NotFound(f"No agent named {name!r}.")
    if len(found) > 1:
        owners = ", ".join(sorted(a.owner.get_username() for a in found))
        raise Ambiguous(f"{len(found)} agents are named {name!r} (owners: {owners}); {pick}.")
    return found[0]
