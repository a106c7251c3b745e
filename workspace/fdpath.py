"""Open workspace files through directory descriptors, never by a full path.

Checking a path and then opening it again by name lets a program that can write the workspace
swap a folder for a symlink in between (renameat2 RENAME_EXCHANGE) and make the daemon read or
replace a file outside it. Here every lookup starts from a descriptor of the workspace root and
opens one component at a time with O_NOFOLLOW | O_DIRECTORY relative to the folder before it;
the result is a `Location`: an open descriptor of the final folder and a name in it. Reads open
that name with O_NOFOLLOW, writes go to a temp file in that folder and are renamed over the name
relative to the same descriptor, so nothing between the check and the use is looked up by path.

Symlinks inside the workspace keep working: a link met on the way is read with readlinkat and
its target is walked the same way, from the descriptors already held. `..` steps back to a held
descriptor (never the file system's own `..`), so no walk climbs above the root; a link to an
absolute path outside the workspace is refused. `openat2(RESOLVE_BENEATH)` would give the same
guarantee on newer kernels; one walk that works everywhere is the only code path here.
"""

from __future__ import annotations

import errno
import os
import secrets
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import aiofiles
import aiofiles.os

DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
MAX_LINKS = 40  # as the kernel's own limit (ELOOP)


class PathOutsideWorkspace(ValueError):
    """Raised for any path that would reach outside the workspace; `str()` is one line."""


@dataclass
class Location:
    """A name inside an open workspace folder: what a path named, pinned to a descriptor.

    `folder` is owned by the Location (close it, or use it as a context manager); `name` is "."
    when the path names the workspace folder itself. `parts` is the real path below the root.
    """

    folder: int
    name: str
    parts: tuple[str, ...]

    @property
    def relative(self) -> str:
        return "/".join(self.parts) or "."

    def lstat(self) -> os.stat_result | None:
        """The name's own status (a symlink is not followed), or None when it does not exist."""
        try:
            return os.stat(self.name, dir_fd=self.folder, follow_symlinks=False)
        except FileNotFoundError:
            return None

    def close(self) -> None:
        if self.folder >= 0:
            os.close(self.folder)
            self.folder = -1

    def __enter__(self) -> Location:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_root(root: Path) -> int:
    """A descriptor of the workspace folder itself (its real path, fixed at start)."""
    return os.open(root, DIR_FLAGS)


def locate(root: Path, user_path: str, *, create_folders: bool = False, follow_links: bool = True) -> Location:
    """Pin `user_path` (relative to `root`, or absolute inside it) to a folder descriptor and a name.

    With `follow_links`, symlinks on the way and at the end are followed inside the workspace;
    without, any symlink on the way raises OSError(ELOOP) (the checkpoint walk records links
    as links). With `create_folders`, missing folders on the way are made. Raises
    PathOutsideWorkspace for a path (or link) leading out, OSError for the rest.
    """
    if "\x00" in user_path:
        raise PathOutsideWorkspace("path contains a NUL byte")
    pending = _components(root, os.path.expanduser(user_path), user_path)
    lexical = os.path.normpath("/".join(pending) or ".")
    if lexical == ".." or lexical.startswith("../"):  # climbs out even before any lookup
        raise _outside(user_path, root)
    held = [open_root(root)]
    names: list[str] = []
    links = 0
    try:
        while pending:
            part = pending.pop(0)
            if part in ("", "."):
                continue
            if part == "..":
                if not names:
                    raise _outside(user_path, root)
                os.close(held.pop())
                names.pop()
                continue
            if not pending:  # the last component: a file, a folder or nothing yet
                target = _link_target(held[-1], part) if follow_links else None
                if target is None:
                    names.append(part)
                    break
            else:
                fd = _open_folder(held[-1], part, create_folders)
                if fd >= 0:
                    held.append(fd)
                    names.append(part)
                    continue
                target = _link_target(held[-1], part)
                if target is not None and not follow_links:
                    raise OSError(errno.ELOOP, "a symbolic link is on the way", part)
                if target is None:
                    raise NotADirectoryError(errno.ENOTDIR, "not a directory", "/".join([*names, part]))
            links += 1
            if links > MAX_LINKS:
                raise OSError(errno.ELOOP, "too many levels of symbolic links", user_path)
            if target.startswith("/"):  # an absolute link restarts at the root (when it points inside)
                while len(held) > 1:
                    os.close(held.pop())
                names.clear()
            pending[:0] = _components(root, target, user_path)
        if not names:
            return Location(held.pop(), ".", ())
        if len(held) > len(names):  # the path ended on a folder that is held: name it from its parent
            os.close(held.pop())
        return Location(held.pop(), names[-1], tuple(names))
    finally:
        for fd in held:
            os.close(fd)


def _components(root: Path, path: str, user_path: str) -> list[str]:
    """The components of `path` below `root`; an absolute path must lie inside it."""
    if os.path.isabs(path):
        base = str(root)
        if path != base and not path.startswith(base.rstrip("/") + "/"):
            raise _outside(user_path, root)
        path = path[len(base):]
    return path.split("/")


def _outside(user_path: str, root: Path) -> PathOutsideWorkspace:
    return PathOutsideWorkspace(f"{user_path!r} is outside the workspace {root}; use a path relative to the workspace")


def _open_folder(parent: int, name: str, create: bool) -> int:
    """A descriptor of folder `name` in `parent`, or -1 when `name` is something else (a link?)."""
    for _ in range(2):
        try:
            return os.open(name, DIR_FLAGS, dir_fd=parent)
        except FileNotFoundError:
            if not create:
                raise
            try:
                os.mkdir(name, 0o777, dir_fd=parent)
            except FileExistsError:
                pass  # made meanwhile: open it
        except OSError as exc:
            if exc.errno in (errno.ENOTDIR, errno.ELOOP):
                return -1
            raise
    return os.open(name, DIR_FLAGS, dir_fd=parent)


def _link_target(parent: int, name: str) -> str | None:
    """The target of symlink `name` in `parent`; None when it is not a symlink (or does not exist)."""
    try:
        return os.readlink(name, dir_fd=parent)
    except OSError as exc:
        if exc.errno in (errno.EINVAL, errno.ENOENT):
            return None
        raise


def open_regular(loc: Location, flags: int = os.O_RDONLY) -> int:
    """Open the Location's name as a regular file (never a link, a FIFO or a device).

    O_NONBLOCK keeps a FIFO planted in the workspace from hanging the reader; it changes
    nothing for a regular file. Raises IsADirectoryError, FileNotFoundError or OSError.
    """
    fd = os.open(loc.name, flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=loc.folder)
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise IsADirectoryError(errno.EISDIR, "is a directory", loc.relative)
        if not stat.S_ISREG(mode):
            raise OSError(errno.EINVAL, "not a regular file", loc.relative)
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def open_folder(loc: Location) -> int:
    """Open the Location's name as a folder (a descriptor for os.scandir)."""
    return os.open(loc.name, DIR_FLAGS, dir_fd=loc.folder)


def read_all(loc: Location) -> bytes:
    fd = open_regular(loc)
    with open(fd, "rb", closefd=True) as fh:
        return fh.read()


def write_atomic(folder: int, name: str, data: bytes, *, mode: int | None = 0o600, fsync: bool = True) -> None:
    """Replace `name` in the open `folder` with `data`; a crash leaves the old file or the new one.

    The temp file is made in the same folder (O_EXCL | O_NOFOLLOW) and renamed over `name`
    relative to the folder's descriptor, so a link or a swapped folder cannot redirect it. A
    symlink at `name` is replaced, not written through. `mode` None keeps the old file's bits.
    """
    fd, tmp, mode = _temp_in(folder, name, mode)
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
        os.rename(tmp, name, src_dir_fd=folder, dst_dir_fd=folder)
    except BaseException:
        _discard(folder, tmp)
        raise
    if fsync:
        os.fsync(folder)


def _temp_in(folder: int, name: str, mode: int | None) -> tuple[int, str, int]:
    """A new temp file beside `name` in the open `folder` (O_EXCL | O_NOFOLLOW): its descriptor,
    its name and the mode the final file gets (`mode` None keeps the old file's bits)."""
    if mode is None:
        try:
            old = os.stat(name, dir_fd=folder, follow_symlinks=False)
            mode = stat.S_IMODE(old.st_mode) if stat.S_ISREG(old.st_mode) else 0o600
        except FileNotFoundError:
            mode = 0o600
    tmp = f".{name[:200]}.{secrets.token_hex(6)}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=folder)
    return fd, tmp, mode


def _discard(folder: int, tmp: str) -> None:
    """A write that failed leaves no temp file behind."""
    try:
        os.unlink(tmp, dir_fd=folder)
    except FileNotFoundError:
        pass


async def write_atomic_async(folder: int, name: str, data: bytes, *, mode: int | None = 0o600,
                             fsync: bool = True) -> None:
    """`write_atomic` off the event loop (aiofiles), with the same guarantees: the temp file is made
    in the held folder and renamed over `name` relative to that folder's descriptor."""
    fd, tmp, mode = _temp_in(folder, name, mode)
    try:
        async with aiofiles.open(fd, "wb", closefd=True) as fh:
            await fh.write(data)
            await fh.flush()
            os.fchmod(fd, mode)
            if fsync:
                await aiofiles.os.wrap(os.fsync)(fd)
        await aiofiles.os.rename(tmp, name, src_dir_fd=folder, dst_dir_fd=folder)
    except BaseException:
        _discard(folder, tmp)
        raise
    if fsync:
        await aiofiles.os.wrap(os.fsync)(folder)


def walk(root: Path) -> Iterator[tuple[str, os.stat_result, str | None]]:
    """Every file and symlink below `root`: relative path, own status, link target (or None).

    Folders are opened relative to their parent with O_NOFOLLOW, one descriptor held per
    level, so a folder swapped for a link meanwhile is skipped, never followed out.
    """
    stack: list[tuple[int, str, list[str]]] = [(open_root(root), "", [])]
    try:
        yield from _list(*stack[0])
        while stack:
            fd, prefix, folders = stack[-1]
            if not folders:
                os.close(fd)
                stack.pop()
                continue
            name = folders.pop()
            try:
                child = os.open(name, DIR_FLAGS, dir_fd=fd)
            except OSError:
                continue  # gone, or replaced by something else since the listing
            stack.append((child, f"{prefix}{name}/", []))
            yield from _list(*stack[-1])
    finally:
        for fd, _, _ in stack:
            os.close(fd)


def _list(fd: int, prefix: str, folders: list[str]) -> Iterator[tuple[str, os.stat_result, str | None]]:
    """The files and links in folder `fd`; its subfolders' names go to `folders`."""
    try:
        entries = list(os.scandir(fd))
    except OSError:
        return
    for entry in entries:
        try:
            if entry.is_dir(follow_symlinks=False):
                folders.append(entry.name)
                continue
            st = entry.stat(follow_symlinks=False)
            if stat.S_ISLNK(st.st_mode):
                yield prefix + entry.name, st, os.readlink(entry.name, dir_fd=fd)
            elif stat.S_ISREG(st.st_mode):
                yield prefix + entry.name, st, None
        except OSError:
            continue  # removed since the listing
