"""`clawgate doctor`'s lines for inbound webhooks: the listener, then one line per `[hooks.<name>]` table.

What config.toml's own check cannot see: a delivery target the daemon would refuse at start, an answer
sent to a channel that is not on, a listener port taken by another program, and a listener bound
beyond loopback (a hook's secret then crosses the network: TLS is a reverse proxy's job).
"""

from __future__ import annotations

import errno
import socket

from clawgate.config.loader import LOOPBACK, ConfigError
from clawgate.config.paths import Paths
from clawgate.config.schema import Settings

Line = tuple[str, str, str, str]  # name, status, detail, fix (gateway/doctor.py Check)


def check_hooks(paths: Paths, settings: Settings) -> list[Line]:
    """Nothing when no hook is configured."""
    if not settings.hooks:
        return []
    from clawgate.agent.triggers.hooks import build_hooks
    from clawgate.config.loader import roster_of

    roster = roster_of(paths, settings)

    http = [h for h in settings.hooks.values() if h.enabled and h.kind == "http"]
    out: list[Line] = [_listener(paths, settings)] if http else []
    for name, table in settings.hooks.items():
        label = f"hook {name}"
        if not table.enabled:
            out.append((label, "skip", "disabled (enabled = false)", ""))
            continue
        try:
            hook = build_hooks({name: table}, roster)[name]
        except ConfigError as exc:
            out.append((label, "fail", str(exc).removeprefix("config error: "),
                        f"fix [hooks.{name}] in config.toml; the gateway refuses to start with it"))
            continue
        auth = "bearer token" if table.token else f"HMAC ({table.signature_scheme}, {table.header})"
        where = f"POST /hooks/{name}: {auth}"
        if table.kind == "imap":
            mailbox = table.imap or {}
            where = f"new mail in {mailbox.get('imap_folder', 'INBOX')} of {mailbox.get('username')} on {mailbox.get('imap_host')}"
        detail = f"{where}; runs in {hook.session}; answers to {hook.deliver or 'the history only'}"
        channel = (hook.deliver or "").partition(":")[0]
        if channel and channel != "gateway" and not _channel_on(settings, channel):
            out.append((label, "warn", f"{detail}, but the {channel} channel is not enabled",
                        f"configure [channels.{channel}], or change the hook's deliver"))
            continue
        out.append((label, "ok", detail, ""))
    return out


def _channel_on(settings: Settings, channel: str) -> bool:
    if channel == "telegram":
        telegram = settings.channels.telegram
        return telegram.enabled is not False and bool(telegram.token)
    section = settings.channels.sections().get(channel)
    return section is not None and str(section.get("enabled")).lower() != "false"


def _listener(paths: Paths, settings: Settings) -> Line:
    from .instance import InstanceLock

    host, port = settings.gateway.hooks_host, settings.gateway.hooks_port
    exposed = host not in LOOPBACK and not host.startswith("127.")
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
            detail = f"{host}:{port} is free"
        except OSError as exc:
            if exc.errno != errno.EADDRINUSE:
                return ("hooks listener", "fail", f"cannot bind {host}:{port}: {exc.strerror}",
                        "set gateway.hooks_host to an address of this machine (127.0.0.1)")
            holder = InstanceLock(paths).holder()
            if holder is None or not holder.is_gateway:
                return ("hooks listener", "fail", f"{host}:{port} is in use by another program",
                        "stop it, or set gateway.hooks_port (CLAWGATE_GATEWAY__HOOKS_PORT) to a free port")
            detail = f"{host}:{port} is served by this home's gateway (pid {holder.pid})"
    if exposed:
        return ("hooks listener", "warn", f"{detail}; bound beyond loopback, so callers' secrets travel in clear text",
                "bind 127.0.0.1 and let a reverse proxy with TLS forward /hooks/ to it")
    return ("hooks listener", "ok", detail, "")
