"""What the daemon does just after its ready line, in a thread of its own that a shutdown does not wait for.

The model SDK's import takes about a second (several on a busy machine) and the exec sandbox's probes run
a child each. Both would stall the event loop, so they run in a thread after the ready line. That thread
is a daemon thread, not the event loop's default executor: `asyncio.Runner` joins the executor's threads
when it closes, so a SIGTERM that came during the import waited for the import to finish before the
process could exit. An import cannot be interrupted; it is simply left behind when the process exits.
(httpx, web_fetch's client, is imported by the first fetch, not here.)

What the thread writes (the probes' log lines) happens under a lock the shutdown takes once: after that
the thread writes nothing, so it never holds the log stream while the interpreter finalises.

A thread left running must not meet the process's exit handlers either: building the model client loads
the CA certificates in OpenSSL without the GIL, and OpenSSL's own cleanup at exit frees what that load is
using (a SIGSEGV instead of exit code 0, about one stop in a hundred right after the ready line). So a
daemon that stops with the thread still running ends with `os._exit` once everything is closed and the
log flushed (`exit_if_left_running`, called by the command line's `main`).
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import threading
from typing import Callable

from clawgate.agent.tools.mounts import mount_status
from clawgate.agent.tools.sandbox import sandbox_status

from .runtime import settle_heap

log = logging.getLogger("clawgate")
_left_running: list[threading.Thread] = []  # the warm-up threads of daemons that have stopped


class WarmUp:
    """Started once after the ready line; `stop` when the daemon shuts down (returns at once, or after
    the probes' last log line if they are being written)."""

    def __init__(self, provider_warm: Callable[[], None] | None) -> None:
        self._provider_warm = provider_warm
        self._writing = threading.Lock()
        self._stopping = False
        self._thread = threading.Thread(target=self._run, name="warm-up", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        with self._writing:
            self._stopping = True
        _left_running.append(self._thread)

    def _run(self) -> None:
        try:
            if self._provider_warm is not None:
                self._provider_warm()
        except Exception:  # the first request imports again and reports what fails, to the chat that asked
            log.warning("warming the model provider failed; the first request will try again", exc_info=True)
        with self._writing:
            if self._stopping:
                return
            # exec's sandbox and mounts are probed by running a child each and waiting for it: here,
            # not on the event loop, where the first clients after the ready line would wait for them
            sandbox = sandbox_status()
            (log.info if sandbox.available else log.warning)("%s", sandbox.line())
            mounts = mount_status()
            (log.info if mounts.available else log.warning)("%s", mounts.line())
            settle_heap()  # what is imported by now lives as long as the daemon


def exit_if_left_running(code: int) -> None:
    """End the process with `code` now, without the interpreter's finalisation and the C library's exit
    handlers, if a stopped daemon's warm-up thread still runs; else return. Called when everything the
    daemon keeps is closed: only the log handlers and the standard streams are left to flush."""
    if not any(thread.is_alive() for thread in _left_running):
        return
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):  # a reader that went away: nothing more to say to it
            stream.flush()
    os._exit(code)
