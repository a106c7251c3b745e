"""`clawgate doctor`: the checks, each one line with its fix, and none needs a running daemon.

Why a separate module from the command: the checks take their probes (the sandbox status,
disk usage) as arguments, so each failing check can be produced in a test without breaking
the machine the test runs on.
"""

from __future__ import annotations

import asyncio
import errno
import shutil
import socket
import stat
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable, Literal

from clawgate.config.loader import ConfigError, load
from clawgate.config.paths import Paths
from clawgate.config.schema import Settings
from clawgate.config.token import gateway_token

from .doctor_channels import check_channels
from .doctor_hooks import check_hooks

Status = Literal["ok", "warn", "fail", "skip"]
ANTHROPIC_URL = "https://api.anthropic.com"
HTTP_SECONDS = 10.0
DISK_FAIL_BYTES = 100 * 1024 * 1024
DISK_WARN_BYTES = 1024 * 1024 * 1024


@dataclass(frozen=True)
class Check:
    name: str
    status: Status
    detail: str
    fix: str = ""

    def to_dict(self) -> dict[str, str]:
        return asdict(self)


def default_sandbox_status() -> Any:
    """The exec sandbox's own report (agent/tools/sandbox.py: Landlock, probed with a real child);
    None when a build has no sandbox module."""
    try:
        from clawgate.agent.tools.sandbox import sandbox_status
    except ImportError:
        return None
    return sandbox_status()


def default_mount_status() -> Any:
    """exec's mount layer (agent/tools/mounts.py: bubblewrap, probed with a real child)."""
    from clawgate.agent.tools.mounts import mount_status

    return mount_status()


def run_checks(paths: Paths, *, offline: bool = False,
               sandbox_status: Callable[[], Any] = default_sandbox_status,
               mount_status: Callable[[], Any] = default_mount_status,
               disk_usage: Callable[[Path], Any] = shutil.disk_usage,
               environ: dict[str, str] | None = None) -> list[Check]:
    """Every check in order; a broken config skips those that need it."""
    try:
        _, settings = load(paths.home, environ)
    except ConfigError as exc:
        needs = [Check(name, "skip", "needs a valid config") for name in
                 ("model", "token", "port", "workspace", "sandbox", "channels")]
        return [Check("config", "fail", str(exc), f"edit {paths.config_file} (or the CLAWGATE_* variable) as it says"),
                *needs, check_database(paths), check_disk(paths, disk_usage)]
    config_detail = f"{paths.config_file} is valid" if paths.config_file.exists() else \
        f"no {paths.config_file}: defaults and environment"
    return [Check("config", "ok", config_detail, "" if paths.config_file.exists() else "`clawgate init` writes one"),
            check_model(settings, offline), check_token(paths, settings), check_port(paths, settings),
            check_workspace(paths, settings), check_sandbox(sandbox_status),
            check_mounts(mount_status), check_exec_path(settings, environ),
            check_database(paths), check_disk(paths, disk_usage),
            *(Check(*found) for found in check_mcp(paths, settings, offline)),  # type: ignore[arg-type]
            *(Check(*found) for found in check_hooks(paths, settings)),  # type: ignore[arg-type]
            # the channels last: a summary line, then one line per enabled channel (gateway/doctor_channels.py)
            *(Check(*found) for found in check_channels(paths, settings, offline)),  # type: ignore[arg-type]
            *check_mail_from_trust(settings), *check_web_search(settings, offline)]


def check_mail_from_trust(settings: Settings) -> list[Check]:
    """One warning when the email channel is on without authserv_id: who a mail is from is then its
    From header, which anyone can write (docs/email.md, From-trust)."""
    section = settings.channels.sections().get("email")
    if section is None or str(section.get("enabled")).lower() == "false" or section.get("authserv_id"):
        return []
    if section.get("enabled") is None and not (section.get("imap_host") and section.get("address")):
        return []
    return [Check("email from", "warn", "channels.email.authserv_id is not set: the From of a mail can be forged, and "
                  "owner rights by mail (approvals included) rest on it",
                  "set authserv_id to the id in your receiving server's Authentication-Results header (docs/email.md)")]


def check_web_search(settings: Settings, offline: bool) -> list[Check]:
    """One line per provider the owner configured (the keyless default alone adds none): one real search
    of one result, so a wrong key, a used-up quota or a SearXNG without its JSON format shows here."""
    from clawgate.agent.tools.search_providers import ProviderFailed, SearchQuery, build_chain

    search = settings.tools.web_search
    if search.providers == ["duckduckgo"]:
        return []
    out: list[Check] = []
    for provider in build_chain(search):
        name = f"search {provider.name}"
        if provider.name == "duckduckgo":
            out.append(Check(name, "ok", "keyless; not contacted"))
        elif offline:
            out.append(Check(name, "skip", "configured; not contacted (--offline)"))
        else:
            try:
                asyncio.run(provider.search(SearchQuery("clawgate", 1)))
            except ProviderFailed as exc:
                out.append(Check(name, "fail", str(exc), "fix its key or address under [tools.web_search] "
                                 "(docs/browser.md); web_search moves on to the next provider meanwhile"))
                continue
            out.append(Check(name, "ok", "answered a test search"))
    return out


def check_model(settings: Settings, offline: bool) -> Check:
    anthropic, compat = settings.providers.anthropic, settings.providers.openai_compat
    if not anthropic.api_key:
        if compat is not None:
            return Check("model", "ok", f"OpenAI-compatible endpoint {compat.base_url} (not called)")
        return Check("model", "fail", "no model key", "export ANTHROPIC_API_KEY=… (or set providers.anthropic.api_key)")
    if offline:
        return Check("model", "skip", "key present; not checked (--offline)")
    import httpx

    base = (anthropic.base_url or ANTHROPIC_URL).rstrip("/")
    try:  # count_tokens: accepted or rejected like a message, and costs nothing
        reply = httpx.post(f"{base}/v1/messages/count_tokens", timeout=HTTP_SECONDS,
                           headers={"x-api-key": anthropic.api_key, "anthropic-version": "2023-06-01"},
                           json={"model": settings.agent.model, "messages": [{"role": "user", "content": "ping"}]})
    except httpx.HTTPError as exc:
        return Check("model", "fail", f"cannot reach {base}: {_short(exc)}",
                     "check the network (or ANTHROPIC_BASE_URL), or run with --offline")
    if reply.status_code == 200:
        return Check("model", "ok", f"key accepted by {base}")
    if reply.status_code in (401, 403):
        return Check("model", "fail", f"the key was rejected by {base} (HTTP {reply.status_code})",
                     "set a valid ANTHROPIC_API_KEY (console.anthropic.com, API keys)")
    if reply.status_code == 404:  # the API's own 404 names the model; any other is an address that is not the API
        error = _json_error(reply)
        if error.get("type") == "not_found_error" and "model" in str(error.get("message", "")):
            return Check("model", "fail", f"{base} does not know the model {settings.agent.model!r}",
                         "set agent.model to a model your key may use")
        return Check("model", "fail", f"{base}/v1/messages/count_tokens answered HTTP 404: that is not the Messages API",
                     "check ANTHROPIC_BASE_URL (or providers.anthropic.base_url): the address without /v1")
    return Check("model", "warn", f"{base} answered HTTP {reply.status_code}; the key was not confirmed",
                 "try again later; see status.anthropic.com")


def _json_error(reply: Any) -> dict[str, Any]:
    """The `error` object of an API's JSON error answer; {} when the body is something else."""
    try:
        error = reply.json().get("error")
    except (ValueError, AttributeError):
        return {}
    return error if isinstance(error, dict) else {}


def check_token(paths: Paths, settings: Settings) -> Check:
    if settings.gateway.token:
        return Check("token", "ok", "gateway.token is set in the config")
    token_file = paths.gateway_token_file
    if gateway_token(paths, settings) is None:
        return Check("token", "warn", "no gateway token yet", "none needed now: the gateway writes "
                     f"{token_file} at its first start (or set gateway.token)")
    mode = stat.S_IMODE(token_file.stat().st_mode)
    if mode & 0o077:
        return Check("token", "fail", f"{token_file} is readable by others (mode {mode:o})", f"chmod 600 {token_file}")
    return Check("token", "ok", f"{token_file} (mode 600)")


def check_port(paths: Paths, settings: Settings) -> Check:
    from .instance import InstanceLock

    host, port = settings.gateway.host, settings.gateway.port
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the server does: TIME_WAIT is free
        try:
            probe.bind((host, port))
            return Check("port", "ok", f"{host}:{port} is free")
        except OSError as exc:
            if exc.errno != errno.EADDRINUSE:
                return Check("port", "fail", f"cannot bind {host}:{port}: {exc.strerror}",
                             "set gateway.host to an address of this machine (127.0.0.1)")
    holder = InstanceLock(paths).holder()
    if holder is not None and holder.is_gateway:
        return Check("port", "ok", f"{host}:{port} is served by this home's gateway (pid {holder.pid})")
    return Check("port", "fail", f"{host}:{port} is in use by another program",
                 "stop it, or set gateway.port (CLAWGATE_GATEWAY__PORT) to a free port")


def check_workspace(paths: Paths, settings: Settings) -> Check:
    root = Path(settings.agent.workspace).expanduser() if settings.agent.workspace else paths.default_workspace
    if not root.is_dir():
        return Check("workspace", "fail", f"{root} is not a folder" if root.exists() else f"{root} does not exist",
                     "run `clawgate init` (or point agent.workspace at a folder)")
    try:
        with tempfile.NamedTemporaryFile(dir=root, prefix=".doctor-"):
            pass
    except OSError as exc:
        return Check("workspace", "fail", f"cannot write in {root}: {exc.strerror}",
                     f"make it writable by this user (chown/chmod {root})")
    return Check("workspace", "ok", f"{root} is writable")


def check_sandbox(sandbox_status: Callable[[], Any]) -> Check:
    try:
        report = sandbox_status()
    except Exception as exc:
        return Check("sandbox", "fail", f"the sandbox check failed: {_short(exc)}", "see docs/security.md")
    if report is None:
        return Check("sandbox", "skip", "this build has no exec sandbox; exec confines by argument checks only")
    available, detail, fix = _sandbox_fields(report)
    if available:
        return Check("sandbox", "ok", detail or "available")
    return Check("sandbox", "fail", detail or "not available",
                 fix or "exec then relies on argument checks alone: run on a Linux kernel with Landlock (5.13+), "
                        "see docs/security.md")


def check_mounts(mount_status: Callable[[], Any]) -> Check:
    """A warning, not a failure: without bubblewrap exec still runs, asking more often."""
    report = mount_status()
    if report.available:
        return Check("mounts", "ok", report.detail)
    return Check("mounts", "warn", report.detail + "; guests' and tainted runs' exec calls then ask the owner",
                 "apt-get install bubblewrap (see docs/security.md, \"Approval by effect\")")


def check_exec_path(settings: Settings, environ: dict[str, str] | None = None) -> Check:
    """Which programs in the home folder exec's sandbox lets run: a version manager whose shims are on PATH
    is granted with its root (pyenv, asdf, nvm, ...); other PATH folders in the home are granted alone, so
    a program there that loads files from elsewhere in the home is refused — the fix names the setting."""
    import os

    from clawgate.agent.tools.sandbox import version_manager_roots

    env = os.environ if environ is None else {**os.environ, **environ}
    search = os.pathsep.join(p for p in env.get("PATH", os.defpath).split(os.pathsep) if os.path.isabs(p))
    if settings.tools.exec.sandbox == "off":
        return Check("exec path", "skip", "exec's sandbox is off (tools.exec.sandbox)")
    home = os.path.realpath(os.path.expanduser("~"))
    roots = version_manager_roots(search)
    managers = ", ".join(f"{name} ({root})" for root, name in roots.items())
    others = [p for p in dict.fromkeys(os.path.realpath(p) for p in search.split(os.pathsep))
              if p.startswith(home + "/") and not any(p.startswith(root + "/") for root in roots)]
    detail = f"version managers exec may run, read-only: {managers}" if managers else "no version manager on PATH"
    if others:
        detail += (f"; PATH folders in the home granted alone: {', '.join(others)} (a program there that loads files "
                   "from elsewhere in the home is refused)")
        return Check("exec path", "ok", detail, "add such folders to tools.exec.sandbox_read_paths")
    return Check("exec path", "ok", detail)


def _sandbox_fields(report: Any) -> tuple[bool, str, str]:
    """The sandbox module's report as (available, detail, fix), whatever simple shape it takes."""
    if isinstance(report, bool):
        return report, "", ""
    if isinstance(report, tuple):
        return bool(report[0]), str(report[1]) if len(report) > 1 else "", ""
    get = report.get if isinstance(report, dict) else lambda key, default=None: getattr(report, key, default)
    available = get("available", get("ok", False))
    detail = get("detail", None) or get("reason", None) or get("backend", None) or ""
    return bool(available), str(detail), str(get("fix", "") or "")


def check_database(paths: Paths) -> Check:
    """Integrity and schema version, read only: an older file is left for the gateway to migrate."""
    from clawgate.agent.core.schema import STATE, version_of
    from clawgate.agent.core.statedb import StateUnavailable, open_state_db

    database = paths.database
    if not database.exists():
        return Check("database", "ok", f"{database} not created yet (the gateway makes it at first start)")
    try:
        db = open_state_db(database, repair=False, migrate_schema=False)
    except StateUnavailable as exc:
        return Check("database", "fail", str(exc).split(";")[0], str(exc).split(";", 1)[-1].strip())
    try:
        version = version_of(db)
    finally:
        db.close()
    later = f"; the gateway brings it to {STATE.version} at its next start" if version < STATE.version else ""
    return Check("database", "ok", f"{database} passed its integrity check (schema {version}{later})")


def check_disk(paths: Paths, disk_usage: Callable[[Path], Any]) -> Check:
    where = paths.home
    while not where.exists() and where != where.parent:
        where = where.parent
    free = disk_usage(where).free
    text = f"{free / 1024 ** 3:.1f} GB free at {where}"
    if free < DISK_FAIL_BYTES:
        return Check("disk", "fail", text, "free disk space: the state database and session logs need room")
    if free < DISK_WARN_BYTES:
        return Check("disk", "warn", text, "free some disk space soon")
    return Check("disk", "ok", text)


def _short(exc: BaseException, secret: str | None = None) -> str:
    text = (str(exc).strip() or type(exc).__name__).splitlines()[0]
    return text.replace(secret, "***") if secret else text


def exit_code(checks: list[Check]) -> int:
    """0: nothing failed (warnings and skips allowed); 1: at least one check failed."""
    return 1 if any(c.status == "fail" for c in checks) else 0


def line(check: Check) -> str:
    mark = {"ok": "ok  ", "warn": "WARN", "fail": "FAIL", "skip": "skip"}[check.status]
    text = f"{mark} {check.name:10} {check.detail}"
    return text + (f" — fix: {check.fix}" if check.fix and check.status != "ok" else "")


# MCP: each configured server started once, hand-shaken, its tools counted. Why start it rather than
# only look for the program: a server that is installed but crashes at start, wants a missing variable
# or refuses our token fails the same way inside the daemon, where it only shows as "down" in
# `clawgate status`. Streamable-HTTP servers are not contacted with --offline; local programs are
# still started (no network involved).
PROBE_SECONDS = 30.0


def check_mcp(paths: Paths, settings: Settings, offline: bool) -> list[tuple[str, str, str, str]]:
    """(name, status, detail, fix) per configured server; nothing when none is configured."""
    workspace = Path(settings.agent.workspace).expanduser() if settings.agent.workspace else paths.default_workspace
    out: list[tuple[str, str, str, str]] = []
    if settings.mcp.servers:
        from clawgate.agent.mcp.connection import ProbeFailed, probe  # the SDK is slow to import: only when needed
    for name, server in settings.mcp.servers.items():
        label = f"mcp {name}"
        if not server.enabled:
            out.append((label, "skip", "disabled (enabled = false)", ""))
            continue
        if offline and server.url:
            out.append((label, "skip", f"{server.url} not contacted (--offline)", ""))
            continue
        quick = server.model_copy(update={"startup_timeout_seconds": min(server.startup_timeout_seconds, PROBE_SECONDS)})
        try:
            count, task_only = asyncio.run(probe(name, quick, cwd=workspace,
                                                 stderr_file=paths.logs / f"mcp-{name}.log"))
        except ProbeFailed as exc:
            out.append((label, "fail", f"did not start: {exc}",
                        f"fix mcp.servers.{name} in config.toml; the server's own messages are in "
                        f"{paths.logs / f'mcp-{name}.log'}"))
            continue
        detail = f"started and listed {count} tool(s)"
        if task_only:
            detail += (f"; {len(task_only)} more not offered to the model, they run only as MCP tasks: "
                       f"{', '.join(task_only[:5])}")
        out.append((label, "ok", detail, ""))
    return out
