"""Keep secrets out of logs, traces and the audit file."""

from __future__ import annotations

import logging
import re
from typing import Iterable

# One alternation, so each text is scanned once (every trace line and log line passes here).
_TOKENS = re.compile(
    r"sk-ant-[A-Za-z0-9_\-]{8,}"
    # Telegram bot tokens, also inside API URLs (".../bot<id>:<secret>/getUpdates": no \b there)
    r"|(?<!\d)\d{6,12}:[A-Za-z0-9_\-]{20,}"
    # a bearer token, with a ":secret" tail when it is a bot token ("Bearer bot123456789:AAH…")
    r"|(?i:(bearer\s+))[A-Za-z0-9._\-]{12,}(?::[A-Za-z0-9_\-]+)?"
)
_secrets: set[str] = set()


def register_secrets(values: Iterable[str | None]) -> None:
    """Remember configured secrets so they are masked wherever they would be written."""
    for value in values:
        if value and len(value) >= 6:
            _secrets.add(value)


def redact(text: str) -> str:
    for secret in _secrets:
        if secret in text:
            text = text.replace(secret, secret[:3] + "…" + "***")
    return _TOKENS.sub(_mask, text)


def _mask(match: re.Match[str]) -> str:
    return (match.group(1) or "") + "***"


class RedactingFilter(logging.Filter):
    """Applied to every handler: masks tokens even in third-party log lines (httpx URLs).

    It also renders a record's traceback once, masked, into `exc_text`, which standard
    formatters print instead of formatting the exception again. (Our LineFormatter masks its
    whole finished line as well.)
    """

    _formatter = logging.Formatter()

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        cleaned = redact(message)
        if cleaned != message:
            record.msg, record.args = cleaned, None
        if record.exc_info and not record.exc_text:
            record.exc_text = redact(self._formatter.formatException(record.exc_info))
        elif record.exc_text:
            record.exc_text = redact(record.exc_text)
        return True
