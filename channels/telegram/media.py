"""What a Telegram message carries besides text, as the kit's IncomingFile (fetched only once the
sender is admitted): the largest photo the model accepts, a document, a voice note or video note.
The kit saves, refuses or transcribes them (channels/kit/files.py)."""

from __future__ import annotations

from typing import AsyncIterator, Awaitable, Callable
from urllib.parse import quote, urlsplit, urlunsplit

import httpx
from telegram import Bot, Message

from clawgate.channels.kit.adapter import IncomingFile
from clawgate.channels.kit.files import IMAGE_MAX_BYTES

PIECE_BYTES = 64 * 1024


def _download(bot: Bot, file_id: str) -> Callable[[], Awaitable[bytes]]:
    async def fetch() -> bytes:
        telegram_file = await bot.get_file(file_id)
        return bytes(await telegram_file.download_as_bytearray())
    return fetch


def _pieces(bot: Bot, file_id: str) -> Callable[[], AsyncIterator[bytes]]:
    """The file's body as it arrives (IncomingFile.stream): Telegram's `file_size` is optional and a
    self-hosted server's body may carry no Content-Length, so the kit reads no further than its limit.
    An HTTP error names the status only: the URL carries the bot's token."""
    async def pieces() -> AsyncIterator[bytes]:
        telegram_file = await bot.get_file(file_id)
        path = str(telegram_file.file_path or "")
        if not path.startswith(("http://", "https://")):  # a local Bot API server's own file: read by PTB
            yield bytes(await telegram_file.download_as_bytearray())
            return
        parts = urlsplit(path)
        url = urlunsplit(parts._replace(path=quote(parts.path)))  # as PTB encodes it
        timeout = httpx.Timeout(30.0, connect=10.0)
        async with httpx.AsyncClient(timeout=timeout) as client, client.stream("GET", url) as response:
            if response.status_code != 200:
                raise RuntimeError(f"Telegram file download: HTTP {response.status_code}")
            async for piece in response.aiter_bytes(PIECE_BYTES):
                yield piece
    return pieces


def incoming_files(bot: Bot, msg: Message) -> tuple[IncomingFile, ...]:
    """The files of `msg` (at most one: Telegram sends one per message)."""
    sound = msg.voice or msg.audio
    if sound is not None:
        return (IncomingFile(None, sound.file_size, getattr(sound, "mime_type", None) or "audio/ogg",
                             _download(bot, sound.file_id), kind="voice", stream=_pieces(bot, sound.file_id)),)
    if msg.video_note is not None:
        note = msg.video_note
        return (IncomingFile(None, note.file_size, "video/mp4", _download(bot, note.file_id), kind="voice",
                             stream=_pieces(bot, note.file_id)),)
    if msg.photo:
        fitting = [p for p in msg.photo if (p.file_size or 0) <= IMAGE_MAX_BYTES]
        best = max(fitting or msg.photo[:1], key=lambda p: p.width * p.height)
        return (IncomingFile(None, best.file_size, "image/jpeg", _download(bot, best.file_id), kind="image",
                             stream=_pieces(bot, best.file_id)),)
    document = msg.document
    if document is not None:
        return (IncomingFile(document.file_name, document.file_size, document.mime_type,
                             _download(bot, document.file_id), stream=_pieces(bot, document.file_id)),)
    return ()
