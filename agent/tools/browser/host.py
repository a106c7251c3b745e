"""One Chromium per daemon, started on first use, and one browser context per person.

Chromium is the system's (tools.browser.executable, else `chromium` on PATH), started by this module,
never downloaded: in its own process group, with PR_SET_PDEATHSIG so it dies with the daemon's
thread, and watched by a tiny reaper process that kills the whole group (renderers included) when the
daemon's end of a pipe closes — even after `kill -9` of the daemon. Playwright connects to it over the
DevTools protocol.

Each person (the owner "", a guest "<channel>:<id>") gets a context of their own: cookies, storage
and tabs are never shared, and each context reaches the network only through its own GateProxy.
A context idle for tools.browser.idle_context_seconds is closed. A crashed Chromium is noticed
(Playwright's "disconnected") and started again on the next use.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import logging
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from clawgate.workspace.users import folder_name

from ...core.fsio import atomic_write_text

from ..base import ToolError
from ..netpolicy import Resolver
from .proxy import Gate, GateProxy

if TYPE_CHECKING:
    from clawgate.config.web_tools import BrowserSettings

log = logging.getLogger(__name__)
START_SECONDS = 30.0
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--no-default-browser-check",
        "--disable-background-networking", "--disable-component-update", "--disable-sync",
        "--disable-dev-shm-usage", "--remote-debugging-port=0", "--disable-quic"]
REAPER = r"""
import os, signal, sys
signal.signal(signal.SIGINT, signal.SIG_IGN)
signal.signal(signal.SIGTERM, signal.SIG_IGN)
group = int(sys.argv[1])
sys.stdin.read()
try:
    os.killpg(group, signal.SIGKILL)
except OSError:
    pass
"""
PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    """In the child before exec: SIGKILL when the daemon's thread that started it ends (Linux only)."""
    with contextlib.suppress(Exception):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


@dataclass
class PersonContext:
    """One person's browser: the Playwright context, its gate, its tabs in opening order."""

    context: Any
    gate: Gate
    proxy: GateProxy
    pages: list[Any] = field(default_factory=list)
    current: int = 0
    used: float = field(default_factory=time.monotonic)
    downloads: list[str] = field(default_factory=list)  # lines about finished downloads, not yet reported
    workspace: Any = None  # the WorkspaceGuard of the person's latest call: where downloads go
    reported: int = 0  # gate.refused lines already told to the model
    who: str = ""  # "" the owner, "<channel>:<id>" a guest
    signed_in: set[str] = field(default_factory=set)  # sites the owner approved sending a password to
    downloading: dict[str, str] = field(default_factory=dict)  # Chromium's download guid -> its URL
    stopped: dict[str, tuple[str, int]] = field(default_factory=dict)  # guid -> (URL, bytes) of one stopped at the limit

    def page(self) -> Any:
        self.pages = [p for p in self.pages if not p.is_closed()]
        if not self.pages:
            raise ToolError("no page is open", "navigate to a URL first")
        self.current = min(self.current, len(self.pages) - 1)
        return self.pages[self.current]


DOWNLOADS = "downloads"
_UNSAFE = re.compile(r"[^A-Za-z0-9._ -]+")


def save_download(workspace: Any, suggested: str, source: str) -> str:
    """Copy a finished download into downloads/ under a safe, new name; returns its workspace path."""
    stem = _UNSAFE.sub("_", os.path.basename(suggested or "")).strip(" .") or "download"
    base, dot, ext = stem[:120].rpartition(".")
    base, ext = (base, "." + ext) if dot and base else (stem[:120], "")
    for attempt in range(1000):
        name = f"{base}{'' if attempt == 0 else f' ({attempt})'}{ext}"
        with workspace.locate(f"{DOWNLOADS}/{name}", create_folders=True) as location:
            try:
                fd = os.open(location.name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600,
                             dir_fd=location.folder)
            except FileExistsError:
                continue
            with os.fdopen(fd, "wb") as out, open(source, "rb") as data:
                shutil.copyfileobj(data, out)
            return location.relative
    raise OSError("no free name in downloads/")


def find_chromium(configured: str | None) -> str:
    """The Chromium to run, or a one-line error naming the package."""
    if configured:
        if os.access(configured, os.X_OK):
            return configured
        raise ToolError(f"tools.browser.executable {configured} is not an executable file",
                        "point it at a Chromium binary, e.g. /usr/bin/chromium")
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        raise ToolError("no Chromium on this machine: the browser needs the system package `chromium` "
                        "(Debian/Ubuntu: apt install chromium)", "ask the owner to install it or set tools.browser.executable")
    return found


class BrowserHost:
    """Chromium, Playwright and the contexts; every method runs on the daemon's event loop."""

    def __init__(self, settings: "BrowserSettings", resolve: Resolver | None = None,
                 state_folder: Path | None = None) -> None:
        """`state_folder`: where kept logins live (tools.browser.keep_logins); None keeps none."""
        self.settings = settings
        self.resolve = resolve
        self.state_folder = state_folder if settings.keep_logins else None
        self._lock = asyncio.Lock()
        self._process: asyncio.subprocess.Process | None = None
        self._reaper: subprocess.Popen[bytes] | None = None
        self._profile: str | None = None
        self._playwright: Any = None
        self._browser: Any = None
        self.contexts: dict[str, PersonContext] = {}
        self.crashed = False
        self._sweeper: asyncio.Task[None] | None = None
        self._devtools: Any = None  # a browser-wide DevTools session: stops downloads past the limit

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    async def person(self, who: str) -> PersonContext:
        """`who`'s context, starting Chromium or the context when needed; idle ones are closed first."""
        async with self._lock:
            await self._close_idle()
            if self._browser is None or not self._browser.is_connected():
                await self._start()
            found = self.contexts.get(who)
            if found is None:
                found = await self._new_context(who)
            found.used = time.monotonic()
            return found

    async def _start(self) -> None:
        await self._stop()
        try:
            from playwright.async_api import async_playwright
        except ImportError:
            raise ToolError("the browser needs Playwright for Python: pip install 'clawgate[browser]'",
                            "ask the owner to install the browser extra") from None
        executable = find_chromium(self.settings.executable)
        self._profile = tempfile.mkdtemp(prefix="clawgate-chromium-")
        self._process = await asyncio.create_subprocess_exec(
            executable, *ARGS, f"--user-data-dir={self._profile}", "about:blank",
            stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
            start_new_session=True, preexec_fn=_die_with_parent)
        self._reaper = subprocess.Popen([sys.executable, "-S", "-c", REAPER, str(self._process.pid)],
                                        stdin=subprocess.PIPE, start_new_session=True)
        endpoint = await self._endpoint()
        try:
            self._playwright = await async_playwright().start()
            self._browser = await self._playwright.chromium.connect_over_cdp(endpoint, timeout=START_SECONDS * 1000)
        except Exception as exc:  # nothing half-started is left behind
            await self._stop()
            raise ToolError(f"could not connect to Chromium: {str(exc).splitlines()[0][:200] if str(exc) else exc}",
                            "try again; if it persists, check `chromium --version` and the daemon log") from None
        self._browser.on("disconnected", lambda _: self._lost())
        self.crashed = False
        self._sweeper = asyncio.ensure_future(self._sweep())
        log.info("browser started: %s (pid %s)", executable, self._process.pid)

    async def _endpoint(self) -> str:
        assert self._process is not None and self._process.stderr is not None
        deadline = time.monotonic() + START_SECONDS
        seen: list[str] = []
        while time.monotonic() < deadline:
            try:
                raw = await asyncio.wait_for(self._process.stderr.readline(), deadline - time.monotonic())
            except asyncio.TimeoutError:
                break
            if not raw:
                break
            line = raw.decode(errors="replace").strip()
            seen.append(line)
            if found := re.search(r"DevTools listening on (ws://\S+)", line):
                asyncio.ensure_future(self._drain_stderr())
                return found.group(1)
        await self._stop()
        said = next((s for s in reversed(seen) if s), "no output")
        raise ToolError(f"Chromium did not start: {said[:200]}", "check tools.browser.executable and `chromium --version`")

    async def _drain_stderr(self) -> None:
        """Chromium keeps writing to stderr; read it so the pipe never fills and blocks the browser."""
        process = self._process
        if process is None or process.stderr is None:
            return
        with contextlib.suppress(Exception):
            while await process.stderr.readline():
                pass

    def _lost(self) -> None:
        if self._browser is not None:
            log.warning("browser disconnected (Chromium ended); it starts again on next use")
            self.crashed = True
            self.contexts.clear()

    async def _new_context(self, who: str) -> PersonContext:
        gate = Gate(self.preapproved(who))
        proxy = GateProxy(gate, self.resolve)
        port = await proxy.start()
        kept = self._state_file(who)
        context = await self._browser.new_context(
            proxy={"server": f"http://127.0.0.1:{port}"}, accept_downloads=True, java_script_enabled=True,
            service_workers="block", viewport={"width": 1280, "height": 900},
            storage_state=str(kept) if kept is not None and kept.exists() else None)
        context.set_default_timeout(self.settings.action_timeout_seconds * 1000)
        context.set_default_navigation_timeout(self.settings.navigation_timeout_seconds * 1000)
        person = PersonContext(context, gate, proxy, who=who)
        context.on("page", lambda page: self._opened(person, page))
        self.contexts[who] = person
        return person

    def preapproved(self, who: str) -> set[str]:
        """The private hosts `who` may open without asking: the owner's list is the owner's only (a guest
        reaching the owner's NAS asks the owner)."""
        return {h.lower() for h in self.settings.allowed_private_hosts} if who == "" else set()

    def _opened(self, person: PersonContext, page: Any) -> None:
        """A new tab (popup, target=_blank, our own open): kept up to max_pages, else closed at once."""
        person.pages = [p for p in person.pages if not p.is_closed()]
        if page in person.pages:
            return
        if len(person.pages) >= self.settings.max_pages:
            asyncio.ensure_future(page.close())
            person.gate.refuse(f"closed a new tab: {self.settings.max_pages} tabs are open (tools.browser.max_pages)")
            return
        person.pages.append(page)
        page.on("download", lambda download: asyncio.ensure_future(self._download(person, download)))
        asyncio.ensure_future(self._watch_downloads(person, page))

    async def _watch_downloads(self, person: PersonContext, page: Any) -> None:
        """Hold each download of `page` to tools.browser.download_max_bytes while it runs: Chromium reports its
        progress over the DevTools protocol (the page's Page.downloadProgress, its announced size or the bytes
        so far), and one past the limit is cancelled (Browser.cancelDownload), its partial file removed by
        Chromium. Progress comes a few times a second: a fast one may pass the limit by that much before it
        stops; `_download` checks the size again at the end."""
        limit = self.settings.download_max_bytes
        try:
            session = await person.context.new_cdp_session(page)
            await session.send("Page.enable")
            context_id = (await session.send("Target.getTargetInfo"))["targetInfo"].get("browserContextId")
        except Exception as exc:  # a page closed at once: nothing of it to watch
            log.debug("browser: download limit not watched on a page: %s", exc)
            return

        def began(event: dict[str, Any]) -> None:
            person.downloading[str(event.get("guid"))] = str(event.get("url", ""))

        def progressed(event: dict[str, Any]) -> None:
            guid = str(event.get("guid"))
            if event.get("state") != "inProgress":
                person.downloading.pop(guid, None)
                return
            over = max(int(event.get("receivedBytes") or 0), int(event.get("totalBytes") or 0))
            if over > limit and guid not in person.stopped:
                person.stopped[guid] = (person.downloading.get(guid, ""), int(event.get("receivedBytes") or 0))
                asyncio.ensure_future(self._cancel_download(guid, context_id))

        session.on("Page.downloadWillBegin", began)
        session.on("Page.downloadProgress", progressed)

    async def _cancel_download(self, guid: str, context_id: str | None) -> None:
        try:
            if self._devtools is None:
                self._devtools = await self._browser.new_browser_cdp_session()
            await self._devtools.send("Browser.cancelDownload",
                                      {"guid": guid, **({"browserContextId": context_id} if context_id else {})})
        except Exception as exc:  # a browser gone: the download went with it
            log.warning("browser: could not stop a download past the limit: %s", exc)

    async def _download(self, person: PersonContext, download: Any) -> None:
        """A finished download goes to the person's workspace under downloads/ (bigger than the limit: deleted;
        one stopped at the limit while running is said so, nothing of it kept)."""
        url = download.url
        limit = self.settings.download_max_bytes
        try:
            path = await download.path()
            size = os.path.getsize(path)
        except Exception as exc:
            cut = next((person.stopped.pop(guid)[1] for guid, (source, _) in list(person.stopped.items())
                        if source == url), None)
            if cut is not None:
                person.downloads.append(f"download of {url} stopped at {cut} bytes: over "
                                        f"tools.browser.download_max_bytes ({limit}); nothing of it was kept")
            else:
                person.downloads.append(f"download of {url} failed: {str(exc).splitlines()[0][:200] if str(exc) else exc}")
            with contextlib.suppress(Exception):
                await download.delete()
            return
        for guid in [g for g, (source, _) in person.stopped.items() if source == url]:
            person.stopped.pop(guid)  # finished before the stop reached it: judged by its size below
        try:
            if size > limit:
                person.downloads.append(f"download of {url} deleted: {size} bytes is over tools.browser.download_max_bytes ({limit})")
                return
            if person.workspace is None:
                return
            saved = save_download(person.workspace, download.suggested_filename, path)
            person.downloads.append(f"downloaded {url} to {saved} ({size} bytes)")
        finally:
            with contextlib.suppress(Exception):
                await download.delete()

    async def _sweep(self) -> None:
        """Close idle contexts even when nobody calls; with none left, Chromium itself stops (memory back)."""
        limit = self.settings.idle_context_seconds
        while True:
            await asyncio.sleep(max(1.0, min(limit / 4, 60.0)))
            async with self._lock:
                await self._close_idle()
                if not self.contexts and self._browser is not None:
                    log.info("browser idle for %gs: Chromium stopped (it starts again on next use)", limit)
                    await self._stop(sweeping=True)
                    return

    async def _close_idle(self) -> None:
        limit = self.settings.idle_context_seconds
        now = time.monotonic()
        for who, person in list(self.contexts.items()):
            if now - person.used > limit:
                await self.close_person(who)

    def _state_file(self, who: str) -> Path | None:
        if self.state_folder is None:
            return None
        return self.state_folder / f"{folder_name(who) if who else 'owner'}.json"

    async def keep_state(self, person: PersonContext) -> None:
        """Save the person's cookies and site storage (keep_logins): after actions, and when the context closes."""
        kept = self._state_file(person.who)
        if kept is None:
            return
        try:
            state = await person.context.storage_state()
        except Exception:  # a context closing or a browser gone: the last saved state stays
            return
        import json

        kept.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        await asyncio.to_thread(atomic_write_text, kept, json.dumps(state), fsync=False)

    async def close_person(self, who: str) -> None:
        person = self.contexts.pop(who, None)
        if person is None:
            return
        await self.keep_state(person)
        with contextlib.suppress(Exception):
            await person.context.close()
        await person.proxy.close()

    async def close(self) -> None:
        async with self._lock:
            await self._stop()

    async def _stop(self, sweeping: bool = False) -> None:
        if self._sweeper is not None and not sweeping:
            self._sweeper.cancel()
        self._sweeper = None
        for who in list(self.contexts):
            await self.close_person(who)
        browser, self._browser, self._devtools = self._browser, None, None
        if browser is not None:
            with contextlib.suppress(Exception):
                await browser.close()
        if self._playwright is not None:
            with contextlib.suppress(Exception):
                await self._playwright.stop()
            self._playwright = None
        if self._process is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self._process.pid, signal.SIGKILL)
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._process.wait(), 10)
            self._process = None
        if self._reaper is not None:
            with contextlib.suppress(Exception):
                self._reaper.stdin.close()  # type: ignore[union-attr]
                self._reaper.wait(5)
            self._reaper = None
        if self._profile:
            shutil.rmtree(self._profile, ignore_errors=True)
            self._profile = None
