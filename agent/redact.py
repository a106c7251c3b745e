"""Keep secrets out of logs, traces and the audit file."""

from __future__ import annotations

import logging
import re
from typing import Iterable

_PATTERNS = [
    re.compile(r"sk-ant-[A-Za-z0-9_\-]{8,}"),
    re.compile(r"\b\d{6,12}:[A-Za-z0-9_\-]{20,}\b"),  # Telegram bot tokens
    re.compile(r"(?i)(bearer\s+)[A-Za-z0-9._\-]{12,}"),
]
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
    for pattern in _PATTERNS:
        text = pattern.sub(lambda m: (m.group(1) if m.groups() else "") + "***", text)
    return text


class RedactingFilter(logging.Filter):
    """Applied to every handler: masks tokens even in third-party log lines (httpx URLs)."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        cleaned = redact(message)
        if cleaned != message:
            record.msg, record.args = cleaned, None
        return True
