"""Email channel: IMAP in (IDLE or polling), SMTP out, threaded replies, no answers to machines.

See docs/email.md. Registered as the `email` entry point of the `clawgate.channels` group; the
adapter and its libraries (the `clawgate[email]` extra) are only imported when the channel is built.
The adapter is the platform's protocol only; access, pairing, commands, dedupe, delivery retries
and approvals are the channel kit's.
"""

from __future__ import annotations

from typing import Any


def __getattr__(name: str) -> Any:
    if name == "EmailAdapter":
        try:
            from .adapter import EmailAdapter
        except ModuleNotFoundError as exc:
            raise ModuleNotFoundError(f"the email channel needs {exc.name!r}: pip install 'clawgate[email]'") from None
        return EmailAdapter
    raise AttributeError(name)


__all__ = ["EmailAdapter"]
