"""Structured one-line logs with secrets masked, including third-party loggers (httpx URLs carry tokens).

The same masked lines go to stderr and, with `log.file`, to a rotating file under
$CLAWGATE_HOME/logs that `clawgate logs` reads (a service's stderr is otherwise only in the journal).
"""

from __future__ import annotations

import logging
import logging.handlers
import os
import re
import sys
import time
from pathlib import Path
from typing import Any

from clawgate.agent.core.redact import RedactingFilter, redact

# `2026-11-23T18:12:26Z info    clawgate.agent.approvals: message`, as LineFormatter writes it.
LINE = re.compile(r"^(?P<ts>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ) (?P<level>[a-z]+) +(?P<logger>[^:\s]+): (?P<message>.*)$")


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


class PrivateRotatingFile(logging.handlers.RotatingFileHandler):
    """A rotating log file created user-only (0600): log lines name chats and sessions."""

    def _open(self) -> Any:
        stream = super()._open()
        os.chmod(self.baseFilename, 0o600)
        return stream


def setup_logging(level: str = "info", *, file: Path | None = None, max_bytes: int = 5 * 1024 * 1024,
                  backups: int = 3) -> None:
    handlers: list[logging.Handler] = [logging.StreamHandler(sys.stderr)]
    if file is not None:
        file.parent.mkdir(parents=True, exist_ok=True)
        os.chmod(file.parent, 0o700)
        handlers.append(PrivateRotatingFile(file, maxBytes=max_bytes, backupCount=backups, encoding="utf-8"))
    for handler in handlers:
        handler.setFormatter(LineFormatter())
        handler.addFilter(RedactingFilter())
    root = logging.getLogger()
    for old in root.handlers:
        if old not in handlers:
            old.close()
    root.handlers[:] = handlers
    root.setLevel(level.upper())
    # httpx logs every request URL at INFO, and Telegram URLs contain the bot token. The channels' client
    # libraries log per event or per connection step at INFO (matrix-nio, discord.py, slack_sdk, aiosmtplib,
    # imapclient): each channel says the one line that matters itself ("connected to … as …").
    for noisy in ("httpx", "httpcore", "httpx2", "websockets", "apscheduler", "telegram.ext", "nio", "discord",
                  "slack_sdk", "aiosmtplib", "imapclient"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


def parse_line(line: str) -> dict[str, str]:
    """One log line as {ts, level, logger, message}; a line in another shape is all message."""
    match = LINE.match(line)
    if match is None:
        return {"ts": "", "level": "", "logger": "", "message": line}
    return match.groupdict()
