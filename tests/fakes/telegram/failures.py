"""Bot API error responses and the ``fail_next`` failure injection.

Why separate: how an error looks (status, description, ``retry_after``) is shared by the
method implementations and by scripted failures.
"""

from __future__ import annotations

from dataclasses import dataclass

from tests.fakes.telegram.records import JSONDict

_DEFAULT_DESCRIPTIONS = {
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden: bot was blocked by the user",
    404: "Not Found",
    409: "Conflict: terminated by other getUpdates request; "
    "make sure that only one bot instance is running",
    500: "Internal Server Error",
    502: "Bad Gateway",
    503: "Service Unavailable",
}


class _ApiError(Exception):
    """An error response of the Bot API; raised inside method handlers."""

    def __init__(self, status: int, description: str, parameters: JSONDict | None = None):
        super().__init__(description)
        self.status = status
        self.description = description
        self.parameters = parameters


@dataclass
class _Failure:
    """One armed fail_next entry."""

    status: int
    retry_after: int | None
    description: str | None
    remaining: int


class _FailureInjection:
    """``FakeTelegram`` part: arm failures that the next calls of a method return."""

    def fail_next(
        self,
        method: str,
        *,
        status: int = 429,
        retry_after: int | None = 1,
        description: str | None = None,
        times: int = 1,
    ) -> None:
        """Make the next ``times`` calls of ``method`` fail with ``status`` (nothing performed)."""
        with self._cond:
            self._failures.setdefault(method.lower(), []).append(
                _Failure(status, retry_after, description, times)
            )

    def _take_failure(self, method: str) -> _ApiError | None:
        queue = self._failures.get(method.lower())
        if not queue:
            return None
        failure = queue[0]
        failure.remaining -= 1
        if failure.remaining <= 0:
            queue.pop(0)
        params: JSONDict | None = None
        if failure.status == 429:
            wait = failure.retry_after
            description = failure.description or f"Too Many Requests: retry after {wait}"
            if wait is not None:
                params = {"retry_after": wait}
        else:
            description = failure.description or _DEFAULT_DESCRIPTIONS.get(
                failure.status, f"Error {failure.status}"
            )
        return _ApiError(failure.status, description, params)

    def _refuse_migrated(self, params: JSONDict) -> None:
        """A call naming a group that became a supergroup: 400 with the new id, as Telegram answers it."""
        chat = params.get("chat_id")
        with self._cond:
            new_id = self._migrated.get(int(chat) if isinstance(chat, str) and chat.lstrip("-").isdigit() else chat)
        if new_id is not None:
            raise _ApiError(400, "Bad Request: group chat was upgraded to a supergroup chat",
                            {"migrate_to_chat_id": new_id})
