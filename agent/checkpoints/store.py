"""Checkpoint files on disk: `state/checkpoints/sessions/<key>/<id>.json`, plus `HEAD`.

HEAD names the newest checkpoint of the session's live branch: the parent of the next one,
and where the branch's lineage (the chain of parents) starts. Retention prunes by count and
age per session, but never a checkpoint some live branch needs (see `prune`).
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path
from typing import Iterator
from urllib.parse import quote, unquote

from ..durability import Durability
from ..fsio import atomic_write_bytes
from .model import Checkpoint, CheckpointRefused, decode, encode

log = logging.getLogger(__name__)


class CheckpointStore:
    def __init__(self, folder: Path, *, fsync: bool = True, durability: Durability | None = None) -> None:
        self.folder = folder / "sessions"
        self.fsync = fsync
        # With a barrier the file is flushed with the next batch (before the reply goes out) rather
        # than inline; until then a power cut may leave it torn, and a torn checkpoint is refused.
        self.durability = durability
        self.folder.mkdir(parents=True, exist_ok=True)
        self._index: dict[str, str] = {}  # checkpoint id -> session key (filled as files are seen)
        # Per session, once read: checkpoint id -> (time, seq), so retention does not decode every file again.
        self._ages: dict[str, dict[str, tuple[float, int]]] = {}

    def _dir(self, session: str) -> Path:
        return self.folder / quote(session, safe="")

    def save(self, cp: Checkpoint, *, head: bool = True) -> None:
        folder = self._dir(cp.session)
        path = folder / f"{cp.id}.json"
        if self.durability is not None and self.fsync:
            _write_new(path, encode(cp))
            self.durability.mark(path)
            self.durability.mark(folder)
        else:
            atomic_write_bytes(path, encode(cp), fsync=self.fsync)
        self._index[cp.id] = cp.session
        if cp.session in self._ages:
            self._ages[cp.session][cp.id] = (cp.time, cp.seq)
        if head:
            self.set_head(cp.session, cp.id)

    def set_head(self, session: str, cp_id: str) -> None:
        """One appended line (cheaper than a rewrite at every step); the last line wins."""
        path = self._dir(session) / "HEAD"
        try:
            fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        except FileNotFoundError:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, (cp_id + "\n").encode())
            size = os.fstat(fd).st_size
        finally:
            os.close(fd)
        if size > 64 * 1024:  # keep it small: only the last line matters
            atomic_write_bytes(path, (cp_id + "\n").encode(), fsync=False)

    def head(self, session: str) -> str | None:
        try:
            lines = (self._dir(session) / "HEAD").read_text().split()
        except FileNotFoundError:
            return None
        return lines[-1] if lines else None

    def sessions(self) -> list[str]:
        return sorted(unquote(p.name) for p in self.folder.iterdir() if p.is_dir())

    def get(self, cp_id: str) -> Checkpoint | None:
        """Load and verify one checkpoint; None when there is none; CheckpointRefused when bad."""
        if not cp_id.startswith("cp_") or "/" in cp_id or len(cp_id) > 40:
            return None
        session = self._index.get(cp_id)
        candidates = [self._dir(session) / f"{cp_id}.json"] if session else []
        candidates += list(self.folder.glob(f"*/{cp_id}.json"))
        for path in candidates:
            try:
                raw = path.read_bytes()
            except FileNotFoundError:
                continue
            cp = decode(raw, name=cp_id)
            self._index[cp.id] = cp.session
            return cp
        return None

    def scan(self, session: str | None = None) -> Iterator[Checkpoint | CheckpointRefused]:
        """Every checkpoint (of one session), each verified; refused ones are yielded as errors."""
        folders = [self._dir(session)] if session is not None else [p for p in self.folder.iterdir() if p.is_dir()]
        for folder in folders:
            for path in sorted(folder.glob("cp_*.json")) if folder.exists() else []:
                try:
                    cp = decode(path.read_bytes(), name=path.stem)
                except CheckpointRefused as exc:
                    yield exc
                    continue
                except FileNotFoundError:
                    continue
                self._index[cp.id] = cp.session
                yield cp

    def all(self, session: str | None = None) -> list[Checkpoint]:
        return sorted((c for c in self.scan(session) if isinstance(c, Checkpoint)), key=lambda c: (c.time, c.seq))

    def lineage(self, session: str) -> list[Checkpoint]:
        """The live branch's checkpoints, newest first: HEAD and its parents (possibly across sessions)."""
        out: list[Checkpoint] = []
        cp_id = self.head(session)
        seen: set[str] = set()
        while cp_id and cp_id not in seen:
            seen.add(cp_id)
            try:
                cp = self.get(cp_id)
            except CheckpointRefused as exc:
                log.warning("%s", exc)
                break
            if cp is None:
                break
            out.append(cp)
            cp_id = cp.parent
        return out

    def delete(self, cp: Checkpoint) -> None:
        (self._dir(cp.session) / f"{cp.id}.json").unlink(missing_ok=True)
        self._index.pop(cp.id, None)
        self._ages.get(cp.session, {}).pop(cp.id, None)

    def _ages_of(self, session: str) -> dict[str, tuple[float, int]]:
        ages = self._ages.get(session)
        if ages is None:
            ages = self._ages[session] = {c.id: (c.time, c.seq) for c in self.scan(session) if isinstance(c, Checkpoint)}
        return ages

    def prune(self, *, keep_count: int, keep_days: float, needed: set[str], now: float | None = None,
              session: str | None = None) -> list[str]:
        """Per session (every one, or just `session`): drop checkpoints beyond the newest `keep_count`
        or older than `keep_days`, except those in `needed` (what live branches stand on). Returns
        the ids removed."""
        now = time.time() if now is None else now
        removed: list[str] = []
        for session in self.sessions() if session is None else [session]:
            ages = self._ages_of(session)
            for index, (cp_id, (created, _seq)) in enumerate(sorted(ages.items(), key=lambda i: i[1], reverse=True)):
                too_many = index >= keep_count
                too_old = now - created > keep_days * 86400
                if (too_many or too_old) and cp_id not in needed:
                    (self._dir(session) / f"{cp_id}.json").unlink(missing_ok=True)
                    self._index.pop(cp_id, None)
                    del ages[cp_id]
                    removed.append(cp_id)
        return removed


def _write_new(path: Path, data: bytes) -> None:
    """A checkpoint id is new, so there is no older file to protect with a rename; a file torn by a
    power cut before the next flush fails its checksum and is refused."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileNotFoundError:  # the session's first checkpoint (or its folder was removed)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
    finally:
        os.close(fd)
