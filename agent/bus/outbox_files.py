"""Files the agent sends: copied into the state folder when sent, read back when delivered.

Why a copy: the workspace file may change or vanish before the reply leaves (a queued reply, a
platform outage, a restart), and the person must get the file as it was when the agent sent it.
The copy (state/outbox-files/<outbound id>/data) is written once, fsynced, never changed, and
removed when its outbox row is delivered or failed for good (gateway/dispatcher.py).
"""

from __future__ import annotations

import mimetypes
import shutil
from pathlib import Path
from typing import Any, Callable

from clawgate.agent.core.fsio import atomic_write_bytes

from .messages import OutboundMessage

DATA = "data"


def store_file(folder: Path, msg: OutboundMessage, name: str, data: bytes, *, fsync: bool = True) -> None:
    """Copy `data` durably for `msg` and reference it from the message (before it is published)."""
    path = folder / msg.id / DATA
    atomic_write_bytes(path, data, fsync=fsync)
    mime = mimetypes.guess_type(name)[0] or "application/octet-stream"
    msg.kind = "file"
    msg.file = {"name": name, "size": len(data), "mime": mime, "path": str(path)}


def read_file(file: dict[str, Any]) -> bytes:
    """The stored copy's bytes (OSError when it is gone)."""
    return Path(file["path"]).read_bytes()


def discard_file(msg: OutboundMessage) -> None:
    """Remove the stored copy of a delivered or given-up file message; nothing for other messages."""
    if msg.file and msg.file.get("path"):
        shutil.rmtree(Path(msg.file["path"]).parent, ignore_errors=True)


def sweep(folder: Path, status: Callable[[str], str | None]) -> int:
    """At start, before any run: remove copies whose outbox row is not pending (a crash right after the
    delivered mark, or before the row was written). Returns how many were removed."""
    if not folder.is_dir():
        return 0
    gone = 0
    for entry in folder.iterdir():
        if status(entry.name) != "pending":
            shutil.rmtree(entry, ignore_errors=True)
            gone += 1
    return gone


def size_text(size: int) -> str:
    for unit in ("bytes", "KB", "MB", "GB"):
        if size < 1024 or unit == "GB":
            return f"{size} {unit}" if unit == "bytes" else f"{size:.1f} {unit}"
        size /= 1024  # type: ignore[assignment]
    return f"{size} bytes"


def unsent_line(msg: OutboundMessage, where: str) -> str:
    """What the person sees instead of a file a channel cannot carry (never a silent drop)."""
    file = msg.file or {}
    line = (f"📎 {file.get('name', 'a file')} ({size_text(int(file.get('size', 0)))}) could not be sent: "
            f"{where}")
    return f"{msg.text}\n\n{line}" if msg.text else line
