"""Trace subscriber: run events appended to one JSONL file per session under state/traces."""

from __future__ import annotations

import os
from collections import OrderedDict
from pathlib import Path
from urllib.parse import quote

from .events import Event
from .jsontext import encoder
from .redact import redact

_encode = encoder(default=str)  # json.dumps(event, ensure_ascii=False, default=str)

SKIP = {"text_delta"}  # too chatty to keep; the final text is in the session log


class TraceWriter:
    """Keeps at most `max_open` files open: the least recently written one is closed for a new one."""

    def __init__(self, folder: Path, *, max_open: int = 64) -> None:
        self.folder = folder
        self.max_open = max(1, max_open)
        folder.mkdir(parents=True, exist_ok=True)
        self._fds: OrderedDict[str, int] = OrderedDict()  # session -> fd, least recently written first

    def __call__(self, event: Event) -> None:
        if event["type"] in SKIP:
            return
        session = str(event.get("session") or "_daemon")
        os.write(self._fd(session), (redact(_encode(event)) + "\n").encode())

    def _fd(self, session: str) -> int:
        fd = self._fds.get(session)
        if fd is not None:
            self._fds.move_to_end(session)
            return fd
        while len(self._fds) >= self.max_open:
            os.close(self._fds.popitem(last=False)[1])
        path = self.folder / (quote(session, safe="") + ".jsonl")
        fd = self._fds[session] = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        return fd

    def close(self) -> None:
        for fd in self._fds.values():
            os.close(fd)
        self._fds.clear()
