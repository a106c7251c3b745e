"""Small file-system helpers shared by the state files and the workspace tools."""

from __future__ import annotations

import os
from pathlib import Path

from clawgate.workspace.fdpath import locate, write_atomic


def atomic_write_bytes(path: Path, data: bytes, *, fsync: bool = True, mode: int | None = 0o600,
                       within: Path | None = None) -> None:
    """Replace `path` with `data` so that a crash leaves the old file or the new one, never half of one.

    Writes a temp file beside it, then renames it over `path`, both relative to the open parent
    folder. With `fsync` the data is flushed before the rename and the folder after it, so the
    change also survives a power loss. `mode` is the new file's permission bits; None keeps
    those of the file it replaces (0o600 if there is none). Parent folders are created.
    `within` (a workspace root, for files written on the agent's behalf) makes the parent be
    found through folder descriptors from that root (workspace/fdpath.py): a folder swapped for
    a symlink cannot lead the write outside it; PathOutsideWorkspace is raised for a path that
    leads out. Raises OSError; the temp file is removed then.
    """
    if within is not None:
        within.mkdir(parents=True, exist_ok=True, mode=0o700)
        with locate(within, str(path), create_folders=True) as loc:
            write_atomic(loc.folder, loc.name, data, mode=mode, fsync=fsync)
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    folder = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        write_atomic(folder, path.name, data, mode=mode, fsync=fsync)
    finally:
        os.close(folder)


def atomic_write_text(path: Path, text: str, *, fsync: bool = True, mode: int | None = 0o600,
                      within: Path | None = None) -> None:
    """`atomic_write_bytes` for UTF-8 text."""
    atomic_write_bytes(path, text.encode("utf-8"), fsync=fsync, mode=mode, within=within)


def fsync_folder(folder: Path) -> None:
    """Make a rename or a new file in `folder` durable."""
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
