"""audit.jsonl: one line per tool execution — who, where, what, how it ended."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from .redact import redact


def summarize_args(args: dict[str, Any], limit: int = 300) -> str:
    text = json.dumps(args, ensure_ascii=False, sort_keys=True)
    text = redact(text)
    return text if len(text) <= limit else text[:limit] + f"…(+{len(text) - limit} chars)"


class AuditLog:
    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)

    def record(self, *, user: str, session: str, tool: str, args: dict[str, Any], status: str, duration_ms: float) -> None:
        line = {
            "ts": round(time.time(), 3), "user": user, "session": session, "tool": tool,
            "args": summarize_args(args), "status": status, "duration_ms": round(duration_ms, 1),
        }
        os.write(self._fd, (json.dumps(line, ensure_ascii=False) + "\n").encode())

    def close(self) -> None:
        os.close(self._fd)
