"""Errors a caller can cause, shared by every entry point (gateway methods, CLI, commands, tools).

Services raise a DomainError with a stable `code` and a one-line message naming the fix; the
gateway maps the code to its error response in one place (gateway/methods.py), the CLI to an
exit code, a chat command to its reply. No entry point needs to know which service raised it.
"""

from __future__ import annotations


class WriteRefused(Exception):
    """A durable write this process may no longer make: a fleet worker whose lease on the session's
    partition ran out or moved (agent/fleet). Not a bug and not the person's problem — the new holder
    carries the run on — so it is logged as one warning line, never answered and never retried here."""


class DomainError(Exception):
    code: str = "invalid_params"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class NotFound(DomainError):
    code = "not_found"


class Conflict(DomainError):
    code = "conflict"


class Forbidden(DomainError):
    code = "forbidden"


class Unavailable(DomainError):
    code = "unavailable"
