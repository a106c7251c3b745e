"""Small file-system helpers shared by the state files and the workspace tools."""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path


def atomic_write_bytes(path: Path, data: bytes, *, fsync: bool = True, mode: int | None = 0o600) -> None:
    """Replace `path` with `data` so that a crash leaves the old file or the new one, never half of one.

    Writes a temp file beside it, then renames it over `path`. With `fsync` the data is flushed
    before the rename and the folder after it, so the change also survives a power loss.
    `mode` is the new file's permission bits; None keeps those of the file it replaces (0o600 if
    there is none). Parent folders are created. Raises OSError; the temp file is removed then.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    if mode is None:
        try:
            mode = stat.S_IMODE(path.stat().st_mode)
        except FileNotFoundError:
            mode = 0o600
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.fchmod(fd, mode)
            if fsync:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    if fsync:
        fsync_folder(path.parent)


def atomic_write_text(path: Path, text: str, *, fsync: bool = True, mode: int | None = 0o600) -> None:
    """`atomic_write_bytes` for UTF-8 text."""
    atomic_write_bytes(path, text.encode("utf-8"), fsync=fsync, mode=mode)


def fsync_folder(folder: Path) -> None:
    """Make a rename or a new file in `folder` durable."""
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


async def atomic_write_async(path: Path, data: bytes, *, mode: int | None = 0o600) -> None:
    """`atomic_write_bytes` off the event loop, for the workspace file tools: a large file written
    (and fsynced) by one session must not stall every other session's turn."""
    import aiofiles
    import aiofiles.os

    path.parent.mkdir(parents=True, exist_ok=True)
    if mode is None:
        try:
            mode = stat.S_IMODE((await aiofiles.os.stat(path)).st_mode)
        except FileNotFoundError:
            mode = 0o600
    async with aiofiles.tempfile.NamedTemporaryFile("wb", dir=path.parent, prefix=f".{path.name}.", suffix=".tmp",
                                                    delete=False) as tmp:
        try:
            await tmp.write(data)
            await tmp.flush()
            os.fchmod(tmp.fileno(), mode)
            await _fsync(tmp.fileno())
        except BaseException:
            await aiofiles.os.remove(tmp.name)
            raise
    try:
        await aiofiles.os.replace(tmp.name, path)
    except BaseException:
        await aiofiles.os.remove(tmp.name)
        raise
    await aiofiles.os.wrap(fsync_folder)(path.parent)


async def _fsync(fd: int) -> None:
    import aiofiles.os

    await aiofiles.os.wrap(os.fsync)(fd)


async def read_bytes_async(path: Path) -> bytes:
    import aiofiles

    async with aiofiles.open(path, "rb") as fh:
        return await fh.read()
