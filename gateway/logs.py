"""Structured one-line logs with secrets masked, including third-party loggers (httpx URLs carry tokens)."""

from __future__ import annotations

import logging
import sys
import time

from agent.redact import RedactingFilter, redact


class LineFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        ts = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
        line = f"{ts}Z {record.levelname.lower():7} {record.name}: {record.getMessage()}"
        if record.exc_info:
            line += " | " + self.formatException(record.exc_info).replace("\n", " | ")
        if record.stack_info:
            line += " | " + self.formatStack(record.stack_info).replace("\n", " | ")
        # The whole line, not just the message: a traceback repeats the exception's text (an httpx
        # error names the URL, which carries the Telegram token), which the filter never sees.
        return redact(line)


def setup_logging(level: str = "info") -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(LineFormatter())
    handler.addFilter(RedactingFilter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    # httpx logs every request URL at INFO, and Telegram URLs contain the bot token.
    for noisy in ("httpx", "httpcore", "httpx2", "websockets", "apscheduler", "telegram.ext"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
