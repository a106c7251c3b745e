"""Trace subscriber: run events appended to one JSONL file per session under state/traces."""

from __future__ import annotations

import json
import os
from pathlib import Path
from urllib.parse import quote

from .events import Event
from .redact import redact

SKIP = {"text_delta"}  # too chatty to keep; the final text is in the session log


class TraceWriter:
    def __init__(self, folder: Path) -> None:
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        self._fds: dict[str, int] = {}

    def __call__(self, event: Event) -> None:
        if event["type"] in SKIP:
            return
        session = str(event.get("session") or "_daemon")
        fd = self._fds.get(session)
        if fd is None:
            path = self.folder / (quote(session, safe="") + ".jsonl")
            fd = self._fds[session] = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        os.write(fd, (redact(json.dumps(event, ensure_ascii=False, default=str)) + "\n").encode())

    def close(self) -> None:
        for fd in self._fds.values():
            os.close(fd)
        self._fds.clear()
