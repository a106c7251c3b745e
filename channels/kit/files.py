"""What a message carries besides text, for any platform: images for the model's eyes, files for the
sender's workspace, voice notes transcribed (or refused).

Fetched only after the sender was admitted and before the message is committed to the inbox: a
crash in between makes the platform deliver it again and the fetch repeats (files are written
under a name derived from the message id, so a repeat overwrites rather than duplicates). Size
limits are checked on the declared size before fetching and on the bytes while they arrive: a streamed
body (IncomingFile.stream) is read no further than the limit, so a body of unknown or false size costs
at most that much memory, and nothing is written unless the whole file fitted.
"""

from __future__ import annotations

import base64
import logging
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence


from clawgate.config.schema import TranscriptionSettings
from clawgate.workspace.fdpath import PathOutsideWorkspace, locate, write_atomic

from .adapter import IncomingFile

log = logging.getLogger("clawgate.channels")

IMAGE_MAX_BYTES = 5 * 1024 * 1024  # the Messages API's limit per image
IMAGE_TYPES = ("image/jpeg", "image/png", "image/gif", "image/webp")
VOICE_REFUSAL = ("I can't listen to voice notes: no transcription is set up for this assistant. "
                 "Please type your message instead.")
TRANSCRIPTION_FAILED = "I couldn't transcribe that voice note; please type it instead."


@dataclass
class Received:
    """A message's content for the agent, or a one-line refusal for the sender."""

    text: str | None = None
    attachments: list[dict[str, Any]] = field(default_factory=list)
    refusal: str | None = None


def safe_name(name: str | None, message_id: int | str) -> str:
    """A file name that cannot leave its folder or hide: basename only, plain characters, bounded length,
    prefixed with the message id (unique per chat, stable across redelivery)."""
    base = os.path.basename((name or "").replace("\\", "/"))
    base = re.sub(r"[^A-Za-z0-9._-]+", "_", base).strip("._-") or "file"
    if len(base) > 100:
        stem, dot, ext = base.rpartition(".")
        base = (stem[: 100 - len(ext) - 1] + dot + ext) if dot and len(ext) <= 10 else base[:100]
    prefix = re.sub(r"[^A-Za-z0-9_-]+", "_", str(message_id))[:64] or "msg"
    return f"{prefix}-{base}"


def size_text(n: int) -> str:
    return f"{n / 1024 / 1024:.1f} MB" if n >= 1024 * 1024 else f"{n / 1024:.1f} KB"


async def receive_files(files: Sequence[IncomingFile], *, caption: str, message_id: str, workspace: Path | None,
                        files_dir: str, max_file_bytes: int, limit_key: str,
                        transcription: TranscriptionSettings | None = None) -> Received:
    """The content of a message's files plus its caption; a refusal on the first file that cannot be taken.

    `limit_key`: the setting that holds the limit, named in a refusal (channels.<name>.max_file_bytes)."""
    lines: list[str] = [caption] if caption else []
    images: list[dict[str, Any]] = []
    for index, item in enumerate(files):
        if item.kind == "voice":
            if transcription is None:
                return Received(refusal=VOICE_REFUSAL)
            data = await read_capped(item, max_file_bytes)
            if data is None:
                return Received(refusal=too_large(max_file_bytes, limit_key, "voice note"))
            import httpx  # only with transcription configured: httpx (and its CLI's imports) cost ~15 MB at start

            try:
                said = await transcribe(transcription, data, item.mime or "audio/ogg")
            except (httpx.HTTPError, ValueError, KeyError) as exc:
                log.warning("transcribing a voice note failed: %s", exc)
                return Received(refusal=TRANSCRIPTION_FAILED)
            lines.append(f"[voice note, transcribed] {said}")
        elif item.kind == "image" and (item.mime or "image/jpeg") in IMAGE_TYPES:
            data = await read_capped(item, IMAGE_MAX_BYTES)
            if data is None:
                return Received(refusal=f"That photo is too large for the model (over {size_text(IMAGE_MAX_BYTES)}, "
                                        "the limit).")
            images.append({"type": "image", "media_type": item.mime or "image/jpeg",
                           "data": base64.b64encode(data).decode("ascii")})
        else:
            if workspace is None:
                return Received(refusal="I can't take files here: this assistant has no workspace folder.")
            declared = item.size or 0
            if declared > max_file_bytes:
                return Received(refusal=f"That file is too large ({size_text(declared)}; the limit is "
                                        f"{size_text(max_file_bytes)}, {limit_key}).")
            data = await read_capped(item, max_file_bytes)
            if data is None:
                return Received(refusal=too_large(max_file_bytes, limit_key))
            key = message_id if len(files) == 1 else f"{message_id}-{index + 1}"
            relative = Path(files_dir) / safe_name(item.name, key)
            write_file(workspace, relative, data)
            lines.append(f"[The user sent a file: saved in the workspace as {relative.as_posix()} "
                         f"({size_text(len(data))}, {item.mime or 'unknown type'}), original name {item.name!r}.]")
    if images and not lines:
        lines.append("(The user sent a photo.)")
    return Received(text="\n".join(lines) or None, attachments=images)


def too_large(limit: int, limit_key: str, what: str = "file") -> str:
    """The refusal of a file that outgrew the limit while it arrived (its whole size is not known)."""
    return f"That {what} is too large (over {size_text(limit)}, the limit; {limit_key})."


async def read_capped(item: IncomingFile, limit: int) -> bytes | None:
    """The file's bytes, or None once more than `limit` of them arrived. A streamed body is read piece by
    piece and closed as soon as it passes the limit (its connection with it); `fetch` is the adapter's
    own bounded read, checked after."""
    if item.stream is None:
        data = await item.fetch()
        return data if len(data) <= limit else None
    received = bytearray()
    pieces = item.stream()
    try:
        async for piece in pieces:
            received += piece
            if len(received) > limit:
                return None
    finally:
        close = getattr(pieces, "aclose", None)
        if close is not None:
            await close()
    return bytes(received)


async def transcribe(settings: TranscriptionSettings, audio: bytes, mime_type: str) -> str:
    """Speech to text through an OpenAI-compatible `/audio/transcriptions` endpoint."""
    import httpx

    headers = {"Authorization": f"Bearer {settings.api_key}"} if settings.api_key else {}
    async with httpx.AsyncClient(timeout=settings.timeout_seconds) as client:
        reply = await client.post(f"{settings.base_url.rstrip('/')}/audio/transcriptions", headers=headers,
                                  data={"model": settings.model}, files={"file": ("voice.ogg", audio, mime_type)})
        reply.raise_for_status()
        text = str(reply.json()["text"]).strip()
    if not text:
        raise ValueError("the transcription is empty")
    return text


def write_file(workspace: Path, relative: Path, data: bytes) -> None:
    """Atomically, private, and only inside the workspace's folder for received files: the folder
    is found through descriptors from the workspace root (workspace/fdpath.py), so a folder
    swapped for a symlink meanwhile cannot lead the write outside."""
    try:
        with locate(workspace.resolve(), str(relative), create_folders=True) as loc:
            write_atomic(loc.folder, loc.name, data, mode=0o600)
    except PathOutsideWorkspace:
        raise ValueError(f"refusing to write outside the workspace: {relative}") from None


__all__ = ["IMAGE_MAX_BYTES", "Received", "VOICE_REFUSAL", "read_capped", "receive_files", "safe_name", "too_large",
           "transcribe", "write_file"]
