"""What the routing core needs of a secret: nothing but to carry it.

``trinity.crypto.Secret`` is one (its str and repr show only the last 4); the core
types the rungs and keys it passes around with this protocol instead of importing
it, so it stays free of the Django side.
"""

from __future__ import annotations

from typing import Protocol


class SecretValue(Protocol):
    """A credential that never prints itself: revealed only where it is sent."""

    def reveal(self) -> str: ...

    @property
    def fingerprint(self) -> str: ...

    def __bool__(self) -> bool: ...
