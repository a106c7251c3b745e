"""Group commit: what must survive a power cut is fsynced in batches, off the event loop.

Writes happen at once (a process crash never loses them: they are in the OS's cache); what
remains is making them survive the machine losing power. Doing that with an fsync inside every
write stalled the whole event loop for each one, and 100 busy sessions paid 100 fsyncs where
one would do. Instead a writer *marks* the file it wrote, and whoever is about to make a promise
that depends on it — acknowledging a message to its platform, sending a reply, running a tool
with side effects — awaits `sync()`. All marks made so far are flushed together in worker
threads; every caller waiting meanwhile shares that one flush.

The rule that keeps the guarantees of docs/architecture.md: nothing is promised to the outside
world before `sync()` returned for the writes it rests on.
"""

from __future__ import annotations

import asyncio
import logging
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Callable

log = logging.getLogger(__name__)


class Durability:
    """The shared barrier. With `enabled` False (state.fsync = false) it is a no-op."""

    def __init__(self, enabled: bool = True, *, fsync: Callable[[str], None] | None = None) -> None:
        self.enabled = enabled
        self._fsync = fsync or _fsync  # injectable: tests hold a flush back to check what waits for it
        self._dirty: set[str] = set()
        self._marked = 0  # generation of the latest mark
        self._synced = 0  # every mark up to this generation is durable
        self._flushing: asyncio.Future[None] | None = None
        self.flushes = 0  # batches flushed so far (tests check that waiters share one)

    def mark(self, path: Path | str) -> None:
        """`path` (a file, or a folder after a create/rename in it) was written; flush it at the next sync."""
        if self.enabled:
            self._dirty.add(os.fspath(path))
            self._marked += 1

    @property
    def pending(self) -> bool:
        return self._synced < self._marked

    async def sync(self) -> None:
        """Return once everything marked before the call is on stable storage. Raises OSError."""
        target = self._marked
        while self._synced < target:
            if self._flushing is None:
                self._start(asyncio.get_running_loop())
            assert self._flushing is not None
            await asyncio.shield(self._flushing)

    def _start(self, loop: asyncio.AbstractEventLoop) -> "asyncio.Future[None]":
        """Hand every mark so far to a worker now (not at the flush task's first step)."""
        paths, upto = self._dirty, self._marked
        self._dirty = set()
        # One hand-off to a worker (one wake-up of the event loop when it is done), which syncs the
        # files side by side: the file system merges concurrent fsyncs into one journal commit.
        work = loop.run_in_executor(None, _fsync_all, self._fsync, list(paths))
        self._flushing = asyncio.ensure_future(self._finish(work, paths, upto))
        return self._flushing

    async def _finish(self, work: "asyncio.Future[None]", paths: set[str], upto: int) -> None:
        try:
            await work
        except OSError:
            self._dirty |= paths  # left for the next sync to try again
            log.exception("could not flush %d state file(s) to disk", len(paths))
            raise
        else:
            self._synced = max(self._synced, upto)
            self.flushes += 1
        finally:
            self._flushing = None

    def sync_now(self) -> None:
        """Flush in the calling thread (shutdown, tools running outside the event loop)."""
        paths, upto = self._dirty, self._marked
        self._dirty = set()
        for path in paths:
            self._fsync(path)
        self._synced = max(self._synced, upto)


_parallel = ThreadPoolExecutor(max_workers=8, thread_name_prefix="fsync")


def _fsync_all(fsync: Callable[[str], None], paths: list[str]) -> None:
    """Every file is tried; the first OSError is raised. The first file is synced in this thread while
    the others are in the pool's: a reply's flush (the state and checkpoint databases) wakes one
    thread fewer on its way to the person."""
    if not paths:
        return
    others = [_parallel.submit(fsync, path) for path in paths[1:]]
    error: BaseException | None = None
    try:
        fsync(paths[0])
    except BaseException as exc:  # the others still finish before anything is raised
        error = exc
    for done in others:
        try:
            done.result()
        except BaseException as exc:
            error = error or exc
    if error is not None:
        raise error


def _fsync(path: str) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return  # gone since (a SQLite WAL after its checkpoint, a replaced file): nothing left to flush
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
