"""Domain errors. Services raise these; one DRF exception handler maps them."""

from __future__ import annotations


class DomainError(Exception):
    """``retry_after`` (seconds), when set, becomes the response's Retry-After header."""

    status_code = 400
    code = "invalid"

    def __init__(
        self, message: str, *, field: str | None = None, retry_after: int | None = None
    ) -> None:
        super().__init__(message)
        self.message = message
        self.field = field
        self.retry_after = retry_after


class NotFound(DomainError):
    status_code = 404
    code = "not_found"


class Forbidden(DomainError):
    status_code = 403
    code = "forbidden"


class Conflict(DomainError):
    status_code = 409
    code = "conflict"


class Finished(Conflict):
    """The turn already finished: there is nothing left to cancel."""

    code = "finished"


class Ambiguous(Conflict):
    """A name several objects carry, none of them the caller's own: say which (an
    admin addressing another owner's agent gives ``?owner=<username>``)."""

    code = "ambiguous"


class InvalidInput(DomainError):
    status_code = 400
    code = "invalid"


class QuotaExceeded(DomainError):
    """A cap the admin sets (agents per operator, schedules per agent) is reached."""

    status_code = 403
    code = "quota_exceeded"


class TooManyTurns(DomainError):
    """The agent already has as many queued and running turns as it may; try later."""

    status_code = 429
    code = "too_many_turns"
