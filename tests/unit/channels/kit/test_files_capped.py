"""A streamed file body (IncomingFile.stream) is read no further than the limit: the kit stops and closes
it past the limit (a body of unknown size costs at most that), answers with the limit line and writes
nothing; a body at the limit is taken whole. The Telegram adapter end to end: tests/e2e/test_telegram_config_e2e.py."""

from __future__ import annotations

from pathlib import Path
from typing import AsyncIterator

from clawgate.channels.kit import IncomingFile
from clawgate.channels.kit.files import IMAGE_MAX_BYTES, read_capped, receive_files

PIECE = b"z" * 1000


class Endless:
    """A body that never ends, counting what was read and whether it was closed."""

    def __init__(self, pieces: int | None = None) -> None:
        self.read, self.closed, self.pieces = 0, False, pieces

    async def body(self) -> AsyncIterator[bytes]:
        try:
            while self.pieces is None or self.read < self.pieces * len(PIECE):
                self.read += len(PIECE)
                yield PIECE
        finally:
            self.closed = True

    def file(self, kind: str = "file") -> IncomingFile:
        async def whole() -> bytes:
            raise AssertionError("the whole body was asked for: a streamed file is read in pieces")
        return IncomingFile("big.bin", None, "image/png" if kind == "image" else None, whole, kind=kind,  # type: ignore[arg-type]
                            stream=self.body)


async def test_reading_stops_just_past_the_limit_and_closes_the_body() -> None:
    body = Endless()
    assert await read_capped(body.file(), 10_000) is None
    assert body.closed and body.read == 11_000  # one piece past the limit, then no more
    exact = Endless(pieces=10)
    assert await read_capped(exact.file(), 10_000) == PIECE * 10 and exact.closed


async def test_a_file_of_unknown_size_past_the_limit_is_refused_and_nothing_is_written(tmp_path: Path) -> None:
    body = Endless()
    received = await receive_files([body.file()], caption="", message_id="7", workspace=tmp_path, files_dir="inbox",
                                   max_file_bytes=50_000, limit_key="channels.x.max_file_bytes")
    assert received.refusal == "That file is too large (over 48.8 KB, the limit; channels.x.max_file_bytes)."
    assert body.closed and body.read <= 51_000 and not (tmp_path / "inbox").exists()


async def test_images_and_voice_notes_are_capped_too(tmp_path: Path) -> None:
    image = Endless()
    received = await receive_files([image.file("image")], caption="", message_id="8", workspace=tmp_path,
                                   files_dir="inbox", max_file_bytes=50_000, limit_key="channels.x.max_file_bytes")
    assert received.refusal is not None and "too large for the model" in received.refusal
    assert image.closed and image.read <= IMAGE_MAX_BYTES + len(PIECE)
    from clawgate.config.schema import TranscriptionSettings

    voice = Endless()
    received = await receive_files([voice.file("voice")], caption="", message_id="9", workspace=tmp_path,
                                   files_dir="inbox", max_file_bytes=50_000, limit_key="channels.x.max_file_bytes",
                                   transcription=TranscriptionSettings(base_url="http://127.0.0.1:9/v1"))
    assert received.refusal == "That voice note is too large (over 48.8 KB, the limit; channels.x.max_file_bytes)."
    assert voice.closed and voice.read <= 51_000
