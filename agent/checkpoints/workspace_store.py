"""The workspace's files at each checkpoint: a content-addressed store outside the workspace.

Blobs are stored once by SHA-256 (`objects/ab/cdef…`), a tree maps every relative path to
its blob and mode (`trees/<sha>.json.z`, zlib-compressed JSON). The store lives under
`state/checkpoints/`, which no agent tool can reach (tools are confined to the workspace).

A snapshot must cost little per step on a large workspace, so files whose size, mtime and
inode have not changed since the last walk are not read again (a stat cache); only changed
files are hashed and stored. Restoring writes back only what differs, removes files created
after the point, and brings deleted ones back.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

from ..fsio import atomic_write_bytes

MAX_FILE_BYTES = 64 * 1024 * 1024  # larger files are left out of snapshots (and left alone on restore)
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

    # snapshot ------------------------------------------------------------------------------
    def snapshot(self) -> str:
        """Store the workspace's current files; returns the tree id (same files, same id)."""
        tree: Tree = {}
        seen: set[str] = set()
        for rel, st, full in self._walk():
            seen.add(rel)
            if stat.S_ISLNK(st.st_mode):
                tree[rel] = ["link", os.readlink(full)]
                continue
            if st.st_size > MAX_FILE_BYTES:
                continue
            tree[rel] = [self._blob_for(rel, st, full), stat.S_IMODE(st.st_mode)]
        for gone in set(self._cache) - seen:
            del self._cache[gone]
        return self._put_tree(tree)

    def _walk(self) -> Iterable[tuple[str, os.stat_result, str]]:
        root = str(self.root)
        stack = [root]
        while stack:
            folder = stack.pop()
            try:
                entries = list(os.scandir(folder))
            except FileNotFoundError:
                continue
            for entry in entries:
                st = entry.stat(follow_symlinks=False)
                if stat.S_ISDIR(st.st_mode):
                    stack.append(entry.path)
                elif stat.S_ISREG(st.st_mode) or stat.S_ISLNK(st.st_mode):
                    yield os.path.relpath(entry.path, root), st, entry.path

    def _blob_for(self, rel: str, st: os.stat_result, full: str) -> str:
        cached = self._cache.get(rel)
        if cached and cached[:3] == (st.st_size, st.st_mtime_ns, st.st_ino):
            return cached[3]
        data = Path(full).read_bytes()
        sha = self.put_blob(data)
        self._cache[rel] = (st.st_size, st.st_mtime_ns, st.st_ino, sha)
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

    def _put_tree(self, tree: Tree) -> str:
        raw = json.dumps(tree, sort_keys=True, separators=(",", ":")).encode()
        sha = hashlib.sha256(raw).hexdigest()
        path = self.trees / f"{sha}.json.z"
        if not path.exists():
            self.trees.mkdir(parents=True, exist_ok=True)
            atomic_write_bytes(path, zlib.compress(raw, 1), fsync=self.fsync)
        return sha

    def tree(self, sha: str) -> Tree:
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
        return data if isinstance(data, dict) else {}

    def blob(self, sha: str) -> bytes:
        try:
            data = zlib.decompress(self._blob_path(sha).read_bytes())
        except (FileNotFoundError, zlib.error):
            raise StoreError(f"stored file {sha[:12]} is missing or corrupt in {self.objects}") from None
        if hashlib.sha256(data).hexdigest() != sha:
            raise StoreError(f"stored file {sha[:12]} does not match its checksum")
        return data

    # restore -------------------------------------------------------------------------------
    def diff(self, sha: str) -> Changes:
        """What a restore to tree `sha` would change, without changing anything."""
        return self._apply(sha, dry_run=True)

    def restore(self, sha: str) -> Changes:
        """Make the workspace equal to tree `sha` (large skipped files are left alone)."""
        return self._apply(sha, dry_run=False)

    def _apply(self, sha: str, *, dry_run: bool) -> Changes:
        target = self.tree(sha)
        for entry in target.values():  # verify every needed blob before touching anything
            if entry[0] != "link" and not self._blob_path(str(entry[0])).exists():
                raise StoreError(f"stored file {str(entry[0])[:12]} is missing; the workspace was not changed")
        changes = Changes()
        current = {rel: (st, full) for rel, st, full in self._walk()}
        for rel, (st, full) in current.items():
            if rel in target or (st.st_size > MAX_FILE_BYTES and not stat.S_ISLNK(st.st_mode)):
                continue
            changes.removed.append(rel)
            if not dry_run:
                os.unlink(full)
                self._cache.pop(rel, None)
        for rel, entry in target.items():
            full = os.path.join(self.root, rel)
            have = current.get(rel)
            if entry[0] == "link":
                if have and stat.S_ISLNK(have[0].st_mode) and os.readlink(full) == entry[1]:
                    continue
                changes.written.append(rel)
                if not dry_run:
                    if have:
                        os.unlink(full)
                    os.makedirs(os.path.dirname(full) or ".", exist_ok=True)
                    os.symlink(str(entry[1]), full)
                continue
            if have and stat.S_ISREG(have[0].st_mode) and self._blob_for(rel, have[0], full) == entry[0]:
                if stat.S_IMODE(have[0].st_mode) != entry[1] and not dry_run:
                    os.chmod(full, int(entry[1]))  # type: ignore[call-overload]
                continue
            changes.written.append(rel)
            if not dry_run:
                if have and stat.S_ISLNK(have[0].st_mode):
                    os.unlink(full)
                os.makedirs(os.path.dirname(full) or ".", exist_ok=True)
                atomic_write_bytes(Path(full), self.blob(str(entry[0])), fsync=False, mode=int(entry[1]))  # type: ignore[call-overload]
        if not dry_run:
            self._prune_empty_dirs(changes.removed, target)
        return changes

    def _prune_empty_dirs(self, removed: list[str], target: Tree) -> None:
        keep = {os.path.dirname(rel) for rel in target}
        for rel in sorted(removed, key=lambda r: -r.count(os.sep)):
            folder = os.path.dirname(rel)
            while folder and not any(k == folder or k.startswith(folder + os.sep) for k in keep):
                try:
                    os.rmdir(os.path.join(self.root, folder))
                except OSError:
                    break
                folder = os.path.dirname(folder)

    # garbage collection --------------------------------------------------------------------
    def collect(self, live_trees: set[str]) -> int:
        """Delete trees no checkpoint names and blobs no kept tree names; returns files removed."""
        removed = 0
        blobs: set[str] = set()
        for path in list(self.trees.glob("*.json.z")) if self.trees.exists() else []:
            sha = path.name[: -len(".json.z")]
            if sha not in live_trees:
                path.unlink(missing_ok=True)
                removed += 1
                continue
            try:
                blobs.update(str(e[0]) for e in self.tree(sha).values() if e[0] != "link")
            except StoreError:
                continue
        for path in list(self.objects.glob("*/*")) if self.objects.exists() else []:
            if path.parent.name + path.name not in blobs and not path.name.startswith("."):
                path.unlink(missing_ok=True)
                removed += 1
        return removed


class StoreError(Exception):
    """A snapshot cannot be read back; `str()` is one line fit to show."""
