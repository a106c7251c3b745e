"""The workspace's files at each checkpoint: a content-addressed store outside the workspace.

Blobs are stored once by SHA-256 (`objects/ab/cdef…`), a tree maps every relative path to
its blob and mode (`trees/<sha>.json.z`, zlib-compressed JSON). A tree is stored as the
changes against the previous one (a few hundred bytes per step), with a full tree every
`FULL_EVERY` snapshots so reading one back follows a short chain. The store lives under
`state/checkpoints/`, which no agent tool can reach (tools are confined to the workspace).

A snapshot must cost little per step on a large workspace, so files whose size, mtime and
inode have not changed since the last walk are not read again (a stat cache); only changed
files are hashed and stored. Restoring writes back only what differs, removes files created
after the point, and brings deleted ones back.

The workspace is walked, read and written through folder descriptors (workspace/fdpath.py)
without following any symlink: a link is recorded and restored as a link, and a folder that a
program in the workspace swaps for a link mid-walk is skipped, never followed out of it.
"""

from __future__ import annotations

import errno
import hashlib
import json
import logging
import os
import stat
import time
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

from clawgate.workspace.fdpath import Location, locate, open_regular, walk, write_atomic

from ..core.fsio import atomic_write_bytes

log = logging.getLogger(__name__)

MAX_FILE_BYTES = 64 * 1024 * 1024  # larger files are left out of snapshots (and left alone on restore)
FULL_EVERY = 50  # a delta chain is at most this long
Tree = dict[str, list[object]]  # relpath -> [blob sha, mode] or ["link", target]


@dataclass
class Changes:
    written: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, list[str]]:
        return {"written": sorted(self.written), "removed": sorted(self.removed)}


class WorkspaceStore:
    def __init__(self, root: Path, folder: Path, *, fsync: bool = True) -> None:
        self.root = root
        self.folder = folder
        self.objects = folder / "objects"
        self.trees = folder / "trees"
        self.fsync = fsync
        self._cache: dict[str, tuple[int, int, int, str]] = {}  # relpath -> (size, mtime_ns, ino, sha)
        self._last: tuple[str, Tree, int] | None = None  # the previous snapshot: id, tree, chain length
        # The stat of every file at that snapshot; set only with `_last`, so a failed walk never
        # leaves a signature that names a tree it did not store.
        self._signature: list[tuple[str, int, int, int, int]] = []
        self._resolved: dict[str, Tree] = {}  # a few trees read back recently

    @property
    def latest(self) -> str | None:
        """The tree the next snapshot is stored against (a base collect() must keep)."""
        return self._last[0] if self._last else None

    # snapshot ------------------------------------------------------------------------------
    def snapshot(self) -> str:
        """Store the workspace's current files; returns the tree id (same files, same id)."""
        found = list(self._walk())
        # Nothing changed since the last walk (every file's mode, size, mtime and inode the same):
        # the same tree, known without a lookup per file. One is taken before every user message.
        signature = [(rel, st.st_mode, st.st_size, st.st_mtime_ns, st.st_ino) for rel, st, _ in found]
        if self._last is not None and signature == self._signature:
            return self._last[0]
        tree: Tree = {}
        seen: set[str] = set()
        for rel, st, link in found:
            seen.add(rel)
            if link is not None:
                tree[rel] = ["link", link]
                continue
            if st.st_size > MAX_FILE_BYTES:
                continue
            sha = self._blob_for(rel, st)
            if sha is not None:  # None: replaced since the walk (by a link?); left out of this snapshot
                tree[rel] = [sha, stat.S_IMODE(st.st_mode)]
        for gone in set(self._cache) - seen:
            del self._cache[gone]
        last = self._last
        if last is not None and last[1] == tree:
            self._signature = signature
            return last[0]
        if last is not None and last[2] < FULL_EVERY:
            changes: dict[str, list[object] | None] = {p: e for p, e in tree.items() if last[1].get(p) != e}
            changes.update({p: None for p in last[1] if p not in tree})
            sha = self._put_object({"base": last[0], "changes": changes})
            self._last = (sha, tree, last[2] + 1)
        else:
            sha = self._put_object({"full": tree})
            self._last = (sha, tree, 0)
        self._signature = signature
        return sha

    def _walk(self) -> Iterable[tuple[str, os.stat_result, str | None]]:
        """Every file and link: relative path, own status, link target (None for a file)."""
        return walk(self.root)

    def _at(self, rel: str, *, create_folders: bool = False) -> Location:
        """`rel` pinned to its open folder, no link followed on the way (OSError if one is)."""
        return locate(self.root, rel, create_folders=create_folders, follow_links=False)

    def _blob_for(self, rel: str, st: os.stat_result) -> str | None:
        """The stored blob of the file at `rel` (read and stored when its status changed), or None
        when it cannot be opened as a regular file below the root any more."""
        cached = self._cache.get(rel)
        if cached and cached[:3] == (st.st_size, st.st_mtime_ns, st.st_ino):
            return cached[3]
        try:
            with self._at(rel) as loc:
                fd = open_regular(loc)
            with open(fd, "rb") as fh:
                now = os.fstat(fh.fileno())
                data = fh.read()
        except OSError as exc:
            if exc.errno in (errno.ENOENT, errno.ENOTDIR, errno.ELOOP, errno.EINVAL):
                return None  # removed, or replaced by a link or a non-file since the walk
            raise
        sha = self.put_blob(data)
        self._cache[rel] = (now.st_size, now.st_mtime_ns, now.st_ino, sha)
        return sha

    def put_blob(self, data: bytes) -> str:
        sha = hashlib.sha256(data).hexdigest()
        path = self._blob_path(sha)
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_bytes(path, zlib.compress(data, 1), fsync=self.fsync)
        return sha

    def _blob_path(self, sha: str) -> Path:
        return self.objects / sha[:2] / sha[2:]

    def _put_object(self, tree: dict[str, object]) -> str:
        raw = json.dumps(tree, sort_keys=True, separators=(",", ":")).encode()
        sha = hashlib.sha256(raw).hexdigest()
        path = self.trees / f"{sha}.json.z"
        if not path.exists():
            self.trees.mkdir(parents=True, exist_ok=True)
            atomic_write_bytes(path, zlib.compress(raw, 1), fsync=self.fsync)
        return sha

    def tree(self, sha: str) -> Tree:
        """The full tree `sha` (following its chain of changes)."""
        if self._last is not None and self._last[0] == sha:
            return self._last[1]
        if sha in self._resolved:
            return self._resolved[sha]
        data = self._object(sha)
        if "full" in data:
            tree: Tree = dict(data["full"])
        else:
            tree = dict(self.tree(str(data.get("base"))))
            for path, entry in (data.get("changes") or {}).items():
                if entry is None:
                    tree.pop(path, None)
                else:
                    tree[path] = entry
        if len(self._resolved) >= 8:
            self._resolved.pop(next(iter(self._resolved)))
        self._resolved[sha] = tree
        return tree

    def _object(self, sha: str) -> dict[str, Any]:
        path = self.trees / f"{sha}.json.z"
        try:
            raw = zlib.decompress(path.read_bytes())
        except FileNotFoundError:
            raise StoreError(f"workspace snapshot {sha[:12]} is missing from {self.trees}") from None
        except zlib.error:
            raise StoreError(f"workspace snapshot {sha[:12]} is corrupt") from None
        if hashlib.sha256(raw).hexdigest() != sha:
            raise StoreError(f"workspace snapshot {sha[:12]} does not match its checksum")
        data = json.loads(raw)
        if not isinstance(data, dict) or not ("full" in data or "base" in data):
            raise StoreError(f"workspace snapshot {sha[:12]} is corrupt")
        return data

    def blob(self, sha: str) -> bytes:
        try:
            data = zlib.decompress(self._blob_path(sha).read_bytes())
        except (FileNotFoundError, zlib.error):
            raise StoreError(f"stored file {sha[:12]} is missing or corrupt in {self.objects}") from None
        if hashlib.sha256(data).hexdigest() != sha:
            raise StoreError(f"stored file {sha[:12]} does not match its checksum")
        return data

    # restore -------------------------------------------------------------------------------
    def diff(self, sha: str, *, only: set[str] | None = None) -> Changes:
        """What a restore to tree `sha` would change, without changing anything."""
        return self._apply(sha, dry_run=True, only=only)

    def restore(self, sha: str, *, only: set[str] | None = None) -> Changes:
        """Make the workspace equal to tree `sha` (large skipped files are left alone); with `only`,
        just those relative paths (written back, or removed when the tree has none)."""
        return self._apply(sha, dry_run=False, only=only)

    def _apply(self, sha: str, *, dry_run: bool, only: set[str] | None = None) -> Changes:
        whole = target = self.tree(sha)
        changes = Changes()
        current = {rel: (st, link) for rel, st, link in self._walk()}
        if only is not None:
            target = {rel: entry for rel, entry in target.items() if rel in only}
            current = {rel: found for rel, found in current.items() if rel in only}
        same: set[str] = set()  # files whose content already matches the tree
        for rel, entry in target.items():  # every blob to write back must be there before anything changes
            have = current.get(rel)
            if entry[0] == "link":
                continue
            if have and have[1] is None and self._blob_for(rel, have[0]) == entry[0]:
                same.add(rel)
                continue
            if not self._blob_path(str(entry[0])).exists():
                raise StoreError(f"stored file {str(entry[0])[:12]} is missing; the workspace was not changed")
        for rel, (st, link) in current.items():
            if rel in target or (st.st_size > MAX_FILE_BYTES and link is None):
                continue
            changes.removed.append(rel)
            if not dry_run:
                self._change(rel, lambda loc: os.unlink(loc.name, dir_fd=loc.folder))
                self._cache.pop(rel, None)
        for rel, entry in target.items():
            have = current.get(rel)
            if entry[0] == "link":
                if have and have[1] == entry[1]:
                    continue
                changes.written.append(rel)
                if not dry_run:
                    self._change(rel, lambda loc, to=str(entry[1]): _put_link(loc, to), create_folders=True)
                continue
            mode = int(entry[1])  # type: ignore[call-overload]
            if rel in same:
                if have and stat.S_IMODE(have[0].st_mode) != mode and not dry_run:
                    self._change(rel, lambda loc: _chmod(loc, mode))
                continue
            changes.written.append(rel)
            if not dry_run:
                data = self.blob(str(entry[0]))
                self._change(rel, lambda loc: write_atomic(loc.folder, loc.name, data, fsync=False, mode=mode),
                             create_folders=True)
        if not dry_run:
            self._prune_empty_dirs(changes.removed, whole)
        return changes

    def _change(self, rel: str, act: Callable[[Location], None], *, create_folders: bool = False) -> None:
        """Do `act` on `rel` in its pinned folder. A folder on the way that is now a link (the
        workspace changed during the restore) leaves this one path alone, with a warning."""
        try:
            with self._at(rel, create_folders=create_folders) as loc:
                act(loc)
        except FileNotFoundError:
            pass  # already gone
        except (OSError, ValueError) as exc:
            log.warning("restore left %s alone: %s", rel, exc)

    def _prune_empty_dirs(self, removed: list[str], target: Tree) -> None:
        keep = {os.path.dirname(rel) for rel in target}
        for rel in sorted(removed, key=lambda r: -r.count(os.sep)):
            folder = os.path.dirname(rel)
            while folder and not any(k == folder or k.startswith(folder + os.sep) for k in keep):
                try:
                    with self._at(folder) as loc:
                        os.rmdir(loc.name, dir_fd=loc.folder)
                except (OSError, ValueError):
                    break
                folder = os.path.dirname(folder)

    # garbage collection --------------------------------------------------------------------
    def collect(self, live_trees: set[str], *, min_age_seconds: float = 0.0) -> int:
        """Delete trees no checkpoint names and blobs no kept tree names; returns files removed.
        `min_age_seconds`: files younger than this stay (another process sharing the folder may be
        writing a snapshot whose checkpoint it has not recorded yet)."""
        removed = 0
        cutoff = time.time() - min_age_seconds if min_age_seconds > 0 else float("inf")
        blobs: set[str] = set()
        keep: set[str] = set()
        for sha in live_trees | ({self._last[0]} if self._last else set()):  # a kept tree needs its whole chain of bases
            while sha and sha not in keep:
                keep.add(sha)
                try:
                    data = self._object(sha)
                except StoreError:
                    break
                entries = data.get("full") or data.get("changes") or {}
                blobs.update(str(e[0]) for e in entries.values() if e and e[0] != "link")
                sha = str(data.get("base") or "")
        for path in list(self.trees.glob("*.json.z")) if self.trees.exists() else []:
            if path.name[: -len(".json.z")] not in keep and _older(path, cutoff):
                path.unlink(missing_ok=True)
                removed += 1
        for path in list(self.objects.glob("*/*")) if self.objects.exists() else []:
            if path.parent.name + path.name not in blobs and not path.name.startswith(".") and _older(path, cutoff):
                path.unlink(missing_ok=True)
                removed += 1
        return removed


def _older(path: Path, cutoff: float) -> bool:
    if cutoff == float("inf"):
        return True
    try:
        return path.stat().st_mtime < cutoff
    except FileNotFoundError:
        return False


def _put_link(loc: Location, target: str) -> None:
    """Make `loc` a symlink to `target` (whatever was there is replaced; the link is not followed)."""
    try:
        os.unlink(loc.name, dir_fd=loc.folder)
    except FileNotFoundError:
        pass
    os.symlink(target, loc.name, dir_fd=loc.folder)


def _chmod(loc: Location, mode: int) -> None:
    fd = open_regular(loc)
    try:
        os.fchmod(fd, mode)
    finally:
        os.close(fd)


class StoreError(Exception):
    """A snapshot cannot be read back; `str()` is one line fit to show."""
