"""What a Telegram message carries besides text: photos for the model's eyes, documents for its
workspace, voice notes it cannot hear.

Why here and not in the agent: the channel knows how Telegram hands out files (getFile, then a
download); the agent only sees an image block on the user's turn, or a line naming the saved file.
Everything is fetched before the message is committed to the inbox, so a crash in between makes
Telegram deliver it again and the fetch repeats (files are written under a name derived from the
message id, so a repeat overwrites rather than duplicates).
"""

from __future__ import annotations

import base64
import logging
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from telegram import Bot, Message

from clawgate.config.schema import TranscriptionSettings
from clawgate.workspace.fdpath import PathOutsideWorkspace, locate, write_atomic

log = logging.getLogger("clawgate.telegram")

IMAGE_MAX_BYTES = 5 * 1024 * 1024  # the Messages API's limit per image
VOICE_REFUSAL = ("I can't listen to voice notes: no transcription is set up for this assistant. "
                 "Please type your message instead.")
TRANSCRIPTION_FAILED = "I couldn't transcribe that voice note; please type it instead."


@dataclass
class Received:
    """A message's content for the agent, or a one-line refusal for the sender."""

    text: str | None = None
    attachments: list[dict[str, Any]] = field(default_factory=list)
    refusal: str | None = None


def safe_name(name: str | None, message_id: int) -> str:
    """A file name that cannot leave its folder or hide: basename only, plain characters, bounded length,
    prefixed with the message id (unique per chat, stable across redelivery)."""
    base = os.path.basename((name or "").replace("\\", "/"))
    base = re.sub(r"[^A-Za-z0-9._-]+", "_", base).strip("._-") or "file"
    if len(base) > 100:
        stem, dot, ext = base.rpartition(".")
        base = (stem[: 100 - len(ext) - 1] + dot + ext) if dot and len(ext) <= 10 else base[:100]
    return f"{message_id}-{base}"


def _size(n: int) -> str:
    return f"{n / 1024 / 1024:.1f} MB" if n >= 1024 * 1024 else f"{n / 1024:.1f} KB"


async def _download(bot: Bot, file_id: str) -> bytes:
    telegram_file = await bot.get_file(file_id)
    return bytes(await telegram_file.download_as_bytearray())


async def receive(bot: Bot, msg: Message, *, caption: str | None, workspace: Path | None, files_dir: str,
                  max_file_bytes: int, transcription: TranscriptionSettings | None = None) -> Received:
    """The content of a message that is not plain text; an empty Received when it carries nothing we read.

    `caption`: the message's caption as addressed to us (a group's @mention removed)."""
    sound = msg.voice or msg.audio
    if sound is not None and transcription is not None:
        data = await _download(bot, sound.file_id)
        try:
            said = await transcribe(transcription, data, getattr(sound, "mime_type", None) or "audio/ogg")
        except (httpx.HTTPError, ValueError, KeyError) as exc:
            log.warning("transcribing a voice note failed: %s", exc)
            return Received(refusal=TRANSCRIPTION_FAILED)
        heard = f"[voice note, transcribed] {said}"
        return Received(text=f"{caption}\n{heard}" if caption else heard)
    if sound is not None or msg.video_note is not None:
        return Received(refusal=VOICE_REFUSAL)
    if msg.photo:
        fitting = [p for p in msg.photo if (p.file_size or 0) <= IMAGE_MAX_BYTES]
        best = max(fitting or msg.photo[:1], key=lambda p: p.width * p.height)
        data = await _download(bot, best.file_id)
        if len(data) > IMAGE_MAX_BYTES:
            return Received(refusal=f"That photo is too large for the model ({_size(len(data))}; the limit is "
                                    f"{_size(IMAGE_MAX_BYTES)}).")
        image = {"type": "image", "media_type": "image/jpeg", "data": base64.b64encode(data).decode("ascii")}
        return Received(text=caption or "(The user sent a photo.)", attachments=[image])
    document = msg.document
    if document is not None:
        if workspace is None:
            return Received(refusal="I can't take files here: this assistant has no workspace folder.")
        declared = document.file_size or 0
        if declared > max_file_bytes:
            return Received(refusal=f"That file is too large ({_size(declared)}; the limit is {_size(max_file_bytes)}, "
                                    "channels.telegram.max_file_bytes).")
        data = await _download(bot, document.file_id)
        if len(data) > max_file_bytes:
            return Received(refusal=f"That file is too large ({_size(len(data))}; the limit is "
                                    f"{_size(max_file_bytes)}, channels.telegram.max_file_bytes).")
        relative = Path(files_dir) / safe_name(document.file_name, msg.message_id)
        _write(workspace, relative, data)
        line = (f"[The user sent a file: saved in the workspace as {relative.as_posix()} ({_size(len(data))}, "
                f"{document.mime_type or 'unknown type'}), original name {document.file_name!r}.]")
        return Received(text=f"{caption}\n{line}" if caption else line)
    return Received()


async def transcribe(settings: TranscriptionSettings, audio: bytes, mime_type: str) -> str:
    """Speech to text through an OpenAI-compatible `/audio/transcriptions` endpoint."""
    headers = {"Authorization": f"Bearer {settings.api_key}"} if settings.api_key else {}
    async with httpx.AsyncClient(timeout=settings.timeout_seconds) as client:
        reply = await client.post(f"{settings.base_url.rstrip('/')}/audio/transcriptions", headers=headers,
                                  data={"model": settings.model}, files={"file": ("voice.ogg", audio, mime_type)})
        reply.raise_for_status()
        text = str(reply.json()["text"]).strip()
    if not text:
        raise ValueError("the transcription is empty")
    return text


def _write(workspace: Path, relative: Path, data: bytes) -> None:
    """Atomically, private, and only inside the workspace's folder for received files: the folder
    is found through descriptors from the workspace root (workspace/fdpath.py), so a folder
    swapped for a symlink meanwhile cannot lead the write outside."""
    try:
        with locate(workspace.resolve(), str(relative), create_folders=True) as loc:
            write_atomic(loc.folder, loc.name, data, mode=0o600)
    except PathOutsideWorkspace:
        raise ValueError(f"refusing to write outside the workspace: {relative}") from None
