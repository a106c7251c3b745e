"""Checkpoints on disk: one SQLite file, `state/checkpoints/checkpoints.db`, in WAL mode.

A row is one checkpoint: its id, session, time and seq (to list and prune without decoding),
and its body, the checkpoint's JSON with schema version and checksum (model.encode), read back
and verified by model.decode. `heads` names, per session, the newest checkpoint of its live
branch: the parent of the next one, and where the branch's lineage (the chain of parents)
starts. Retention prunes by count and age per session, but never a checkpoint some live branch
needs (see `prune`).

One checkpoint is taken before every user message, so its cost is paid per message. A file per
checkpoint cost a new file and two fsyncs (the file and its folder) each; rows in one database
are made durable by one fsync of its WAL per group flush, shared by every session (see
agent/core/durability.py). Checkpoint files of earlier versions are moved into the database at open.
"""

from __future__ import annotations

import contextlib
import logging
import time
from pathlib import Path
from typing import Iterator
from urllib.parse import unquote

from ..core.durability import Durability
from ..core.schema import CHECKPOINTS
from ..core.statedb import durable_file, open_state_db
from .model import Checkpoint, CheckpointRefused, decode, encode

log = logging.getLogger(__name__)


class CheckpointStore:
    def __init__(self, folder: Path, *, fsync: bool = True, durability: Durability | None = None,
                 repair: bool = True) -> None:
        self.path = folder / "checkpoints.db"
        # With a barrier the rows are flushed with the next batch (before the reply goes out);
        # without one (offline commands) every commit is fsynced by SQLite itself.
        self.durability = durability if fsync else None
        self._db = open_state_db(self.path, fsync=fsync and durability is None, repair=repair, schema=CHECKPOINTS)
        self._wal = durable_file(self._db)
        self._import_files(folder / "sessions")

    def close(self) -> None:
        self._db.close()

    def _written(self) -> None:
        if self.durability is not None:
            self.durability.mark(self._wal)

    # writing -------------------------------------------------------------------------------
    def save(self, cp: Checkpoint, *, head: bool = True) -> None:
        with self._db:
            self._db.execute("BEGIN")
            self._db.execute("INSERT OR REPLACE INTO checkpoints(id, session, time, seq, body) VALUES (?, ?, ?, ?, ?)",
                             (cp.id, cp.session, cp.time, cp.seq, encode(cp)))
            if head:
                self._set_head(cp.session, cp.id)
        self._written()

    def set_head(self, session: str, cp_id: str) -> None:
        with self._db:
            self._set_head(session, cp_id)
        self._written()

    def _set_head(self, session: str, cp_id: str) -> None:
        self._db.execute("INSERT INTO heads(session, id) VALUES (?, ?) ON CONFLICT(session) DO UPDATE SET id=excluded.id",
                         (session, cp_id))

    def delete(self, cp: Checkpoint) -> None:
        with self._db:
            self._db.execute("DELETE FROM checkpoints WHERE id=?", (cp.id,))
        self._written()

    # reading -------------------------------------------------------------------------------
    def head(self, session: str) -> str | None:
        row = self._db.execute("SELECT id FROM heads WHERE session=?", (session,)).fetchone()
        return row[0] if row else None

    def heads(self) -> dict[str, str]:
        """Every session's HEAD in one read."""
        return dict(self._db.execute("SELECT session, id FROM heads").fetchall())

    def sessions(self) -> list[str]:
        rows = self._db.execute("SELECT session FROM checkpoints UNION SELECT session FROM heads ORDER BY 1")
        return [r[0] for r in rows]

    def get(self, cp_id: str) -> Checkpoint | None:
        """Load and verify one checkpoint; None when there is none; CheckpointRefused when bad."""
        row = self._db.execute("SELECT body FROM checkpoints WHERE id=?", (cp_id,)).fetchone()
        return decode(bytes(row[0]), name=cp_id) if row else None

    def scan(self, session: str | None = None) -> Iterator[Checkpoint | CheckpointRefused]:
        """Every checkpoint (of one session), each verified; refused ones are yielded as errors."""
        if session is None:
            rows = self._db.execute("SELECT id, body FROM checkpoints ORDER BY session, time, seq").fetchall()
        else:
            rows = self._db.execute("SELECT id, body FROM checkpoints WHERE session=? ORDER BY time, seq",
                                    (session,)).fetchall()
        for cp_id, body in rows:
            try:
                yield decode(bytes(body), name=cp_id)
            except CheckpointRefused as exc:
                yield exc

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

    # retention -----------------------------------------------------------------------------
    def prune(self, *, keep_count: int, keep_days: float, needed: set[str], now: float | None = None,
              session: str | None = None) -> list[str]:
        """Per session (every one, or just `session`): drop checkpoints beyond the newest `keep_count`
        or older than `keep_days`, except those in `needed` (what live branches stand on). Returns
        the ids removed. Reads only ids, times and seqs: no checkpoint is decoded."""
        now = time.time() if now is None else now
        removed: list[str] = []
        for key in self.sessions() if session is None else [session]:
            rows = self._db.execute("SELECT id, time FROM checkpoints WHERE session=? ORDER BY time DESC, seq DESC",
                                    (key,)).fetchall()
            for index, (cp_id, created) in enumerate(rows):
                too_many = index >= keep_count
                too_old = now - created > keep_days * 86400
                if (too_many or too_old) and cp_id not in needed:
                    removed.append(cp_id)
        if removed:
            with self._db:
                self._db.executemany("DELETE FROM checkpoints WHERE id=?", [(cp_id,) for cp_id in removed])
            self._written()
        return removed

    # checkpoint files of earlier versions ----------------------------------------------------
    def _import_files(self, folder: Path) -> None:
        """Move `sessions/<key>/<id>.json` and `HEAD` files into the database, then remove them.
        Rows go in before any file is removed, so an interrupted move is finished at the next open.
        A file that does not decode goes in as it is, and is refused when read, as it was before."""
        if not folder.is_dir():
            return
        moved: list[Path] = []
        with self._db:
            self._db.execute("BEGIN")
            for sub in sorted(p for p in folder.iterdir() if p.is_dir()):
                session = unquote(sub.name)
                for path in sorted(sub.glob("cp_*.json")):
                    raw = path.read_bytes()
                    try:
                        cp = decode(raw, name=path.stem)
                        row = (cp.id, cp.session, cp.time, cp.seq, raw)
                    except CheckpointRefused:
                        row = (path.stem, session, path.stat().st_mtime, 0, raw)
                    self._db.execute("INSERT OR IGNORE INTO checkpoints(id, session, time, seq, body) "
                                     "VALUES (?, ?, ?, ?, ?)", row)
                    moved.append(path)
                head_file = sub / "HEAD"
                if head_file.exists():
                    lines = head_file.read_text(encoding="utf-8", errors="replace").split()
                    if lines:  # a head set since (by this version) wins over the file's
                        self._db.execute("INSERT OR IGNORE INTO heads(session, id) VALUES (?, ?)", (session, lines[-1]))
                    moved.append(head_file)
        if not moved:
            return
        if self.durability is not None:  # the rows must be on disk before the files are gone
            self._written()
            self.durability.sync_now()
        for path in moved:
            path.unlink(missing_ok=True)
        # Folders still holding something (put there by hand) are left as they are.
        for emptied in [*folder.iterdir(), folder]:
            with contextlib.suppress(OSError):
                emptied.rmdir()
        log.info("moved %d checkpoint file(s) into %s", len(moved), self.path.name)

