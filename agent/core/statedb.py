"""The one way to open the daemon's SQLite files (the state database and the checkpoint database).

Every owner of a table opens the file here, so all connections share one set of settings:
busy_timeout first (so the pragmas below wait for another process instead of failing), a
refusal of files a newer clawgate wrote (before anything is changed), WAL (the rollback journal
when the file is on a network filesystem: a fleet spread over hosts, filesystems.py), `synchronous` from
`state.fsync`, a quick_check, and then the file's schema brought up to date (schema.py): the
stores only query.

Only real corruption (a failed quick_check, or "file is not a database") moves the file aside
and starts a fresh one. A locked database, a full disk or too many open files are not
corruption: they raise StateUnavailable with one line naming the problem, and the file stays.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import time
from pathlib import Path

from .filesystems import on_network_filesystem
from .schema import STATE, Schema, SchemaTooNew, migrate, refuse_newer

log = logging.getLogger(__name__)
BUSY_TIMEOUT_MS = 5000
# How long an open keeps trying while other processes hold the file. One statement waits
# BUSY_TIMEOUT_MS, but under the rollback journal (a fleet on a network filesystem) a process that
# commits again and again can starve another's reads past it: a starting daemon tries again rather
# than stopping while the rest of its fleet is busy.
OPEN_PATIENCE_SECONDS = 20.0
# sqlite3 error codes that mean "the bytes are damaged", as opposed to "cannot use it now".
_CORRUPT_CODES = {sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB}


class StateUnavailable(Exception):
    """The state database exists but cannot be used right now; the message names the fix."""


def open_state_db(path: Path, *, fsync: bool = True, repair: bool = True, schema: Schema = STATE,
                  migrate_schema: bool = True) -> sqlite3.Connection:
    """Open (creating if needed) the state database with the shared settings and current schema.

    `repair`: move a corrupt file aside and start afresh (the daemon); the CLI passes False and
    reports instead, so an offline command never throws away the daemon's state.
    `schema`: which file this is (schema.STATE or schema.CHECKPOINTS). `migrate_schema=False`
    (doctor) only checks the file is not newer than this code and changes nothing in it.
    Raises StateUnavailable for anything that is not corruption, including a file a newer
    clawgate wrote (left exactly as it is).
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        return _open_patiently(path, fsync, schema, migrate_schema)
    except sqlite3.DatabaseError as exc:
        if not _is_corrupt(exc):
            raise StateUnavailable(_unavailable(path, exc)) from None
        if not repair:
            raise StateUnavailable(f"state database {path} is corrupt ({exc}); start the gateway once to set it "
                                   "aside and begin a fresh one") from None
        aside = path.with_name(f"{path.name}.corrupt-{int(time.time())}")
        path.rename(aside)
        for suffix in ("-wal", "-shm"):
            extra = path.with_name(path.name + suffix)
            if extra.exists():
                extra.rename(aside.with_name(aside.name + suffix))
        log.error("state database %s is corrupt (%s); moved aside to %s and started a new one", path, exc, aside.name)
        try:
            return _open(path, fsync, schema, migrate_schema)
        except sqlite3.DatabaseError as again:
            raise StateUnavailable(_unavailable(path, again)) from None
    except OSError as exc:
        raise StateUnavailable(f"cannot open state database {path}: {exc.strerror or exc}; check the folder's "
                               "permissions, free disk space and open-file limit") from None


def _open_patiently(path: Path, fsync: bool, schema: Schema, migrate_schema: bool) -> sqlite3.Connection:
    """`_open`, tried again while the file is only busy (never on any other error)."""
    deadline = time.monotonic() + OPEN_PATIENCE_SECONDS
    while True:
        try:
            return _open(path, fsync, schema, migrate_schema)
        except sqlite3.OperationalError as exc:
            if not _is_busy(exc) or time.monotonic() >= deadline:
                raise
            time.sleep(0.1)


def _is_busy(exc: sqlite3.OperationalError) -> bool:
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None:
        return (code & 0xFF) in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)
    return "locked" in str(exc) or "busy" in str(exc)


def _open(path: Path, fsync: bool, schema: Schema, migrate_schema: bool) -> sqlite3.Connection:
    if not path.exists():  # created user-only, so there is no moment it is readable by others
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT, 0o600))
    db = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False, timeout=BUSY_TIMEOUT_MS / 1000)
    try:
        db.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")  # first: the pragmas below may need to wait
        refuse_newer(db, schema, path)  # before WAL or anything else could change a newer file
        db.execute(f"PRAGMA journal_mode={journal_mode(path)}")
        # FULL fsyncs the WAL on each commit (power-loss safe); NORMAL is process-crash safe.
        db.execute(f"PRAGMA synchronous={'FULL' if fsync else 'NORMAL'}")
        result = db.execute("PRAGMA quick_check").fetchone()[0]
        if result != "ok":
            error = sqlite3.DatabaseError(f"integrity check failed: {result}")
            error.sqlite_errorcode = sqlite3.SQLITE_CORRUPT  # type: ignore[attr-defined]
            raise error
        new_file = db.execute("SELECT count(*) FROM sqlite_master").fetchone()[0] == 0
        if migrate_schema and (steps := migrate(db, schema, path)) and not new_file:  # a new file is not news
            log.info("%s: schema brought to %d (%s)", path.name, steps[-1].version, "; ".join(s.name for s in steps))
    except SchemaTooNew as exc:
        db.close()
        raise StateUnavailable(str(exc)) from None
    except BaseException:
        db.close()
        raise
    # Conversations and pairing codes: user-only. SQLite creates -wal and -shm later (first write,
    # first read) with the database file's own mode, so 0600 here carries over to them.
    for suffix in ("", "-wal", "-shm"):
        file = path.with_name(path.name + suffix)
        if file.exists():
            file.chmod(0o600)
    return db


_told: set[str] = set()


def journal_mode(path: Path) -> str:
    """WAL on a local filesystem; DELETE (the rollback journal) on a network one, where processes on
    other hosts may open the file and cannot share WAL's memory-mapped index."""
    network = on_network_filesystem(path.parent)
    if network is None:
        return "WAL"
    if str(path) not in _told:
        _told.add(str(path))
        log.info("%s is on a network filesystem (%s): using the rollback journal, which works across hosts; "
                 "WAL needs every process on one host", path.name, network)
    return "DELETE"


def durable_file(db: sqlite3.Connection) -> str:
    """The file a commit lands in, for the group-commit barrier to fsync: the WAL, or the database
    itself under the rollback journal."""
    path = db.execute("PRAGMA database_list").fetchone()[2]
    wal = str(db.execute("PRAGMA journal_mode").fetchone()[0]).lower() == "wal"
    return path + "-wal" if wal else path


def _is_corrupt(exc: sqlite3.DatabaseError) -> bool:
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None:
        return (code & 0xFF) in _CORRUPT_CODES
    text = str(exc).lower()
    return "malformed" in text or "not a database" in text or "integrity check failed" in text


def _unavailable(path: Path, exc: sqlite3.DatabaseError) -> str:
    text = str(exc)
    if "locked" in text or "busy" in text:
        return (f"state database {path} is locked by another process ({text}); stop the other clawgate process "
                "or wait, then try again")
    if "disk" in text or "full" in text:
        return f"state database {path} cannot be written ({text}); free disk space and try again"
    return f"cannot open state database {path} ({text}); check permissions, free disk space and the open-file limit"
