"""What a Telegram message carries besides text, as the kit's IncomingFile (fetched only once the
sender is admitted): the largest photo the model accepts, a document, a voice note or video note.
The kit saves, refuses or transcribes them (channels/kit/files.py)."""

from __future__ import annotations

from typing import Awaitable, Callable

from telegram import Bot, Message

from clawgate.channels.kit.adapter import IncomingFile
from clawgate.channels.kit.files import IMAGE_MAX_BYTES


def _download(bot: Bot, file_id: str) -> Callable[[], Awaitable[bytes]]:
    async def fetch() -> bytes:
        telegram_file = await bot.get_file(file_id)
        return bytes(await telegram_file.download_as_bytearray())
    return fetch


def incoming_files(bot: Bot, msg: Message) -> tuple[IncomingFile, ...]:
    """The files of `msg` (at most one: Telegram sends one per message)."""
    sound = msg.voice or msg.audio
    if sound is not None:
        return (IncomingFile(None, sound.file_size, getattr(sound, "mime_type", None) or "audio/ogg",
                             _download(bot, sound.file_id), kind="voice"),)
    if msg.video_note is not None:
        note = msg.video_note
        return (IncomingFile(None, note.file_size, "video/mp4", _download(bot, note.file_id), kind="voice"),)
    if msg.photo:
        fitting = [p for p in msg.photo if (p.file_size or 0) <= IMAGE_MAX_BYTES]
        best = max(fitting or msg.photo[:1], key=lambda p: p.width * p.height)
        return (IncomingFile(None, best.file_size, "image/jpeg", _download(bot, best.file_id), kind="image"),)
    document = msg.document
    if document is not None:
        return (IncomingFile(document.file_name, document.file_size, document.mime_type,
                             _download(bot, document.file_id)),)
    return ()
