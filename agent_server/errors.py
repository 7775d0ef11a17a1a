"""The one exception a turn raises when it does not produce an answer."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from trinity_contract.errors import ERROR_STATUS, ErrorCode

if TYPE_CHECKING:
    from agent_server.metering import Metered


class TurnError(Exception):
    """A typed refusal or fault; the HTTP layer renders it as an `ErrorBody`.

    `detail` may carry provider or CLI text; the HTTP layer redacts it before it
    leaves the process, so raisers need not (but may) redact it themselves.
    """

    def __init__(
        self,
        error_code: ErrorCode,
        detail: str,
        resets_at: datetime | None = None,
        limiting_window: str | None = None,
    ):
        super().__init__(f"{error_code}: {detail}")
        self.error_code: ErrorCode = error_code
        self.detail = detail
        self.resets_at = resets_at
        # The provider's representative claim on a rate-limit refusal, when seen.
        self.limiting_window = limiting_window
        # What the turn's requests spent before it failed (set by the server).
        self.metered: Metered | None = None

    @property
    def status_code(self) -> int:
        return ERROR_STATUS[self.error_code]
