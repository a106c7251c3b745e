"""Plain-text rendering of `status` and `usage` for the terminal (`--json` prints them as they are)."""

from __future__ import annotations

import re
import time
from typing import Any

LABEL = 16


def _n(value: Any) -> str:
    return f"{value:,}" if isinstance(value, int) else "0"


def counts_line(c: dict[str, Any]) -> str:
    return (f"{_n(c.get('input_tokens'))} in, {_n(c.get('output_tokens'))} out, "
            f"{_n(c.get('cache_read_input_tokens'))} cache read, {_n(c.get('cache_creation_input_tokens'))} cache write "
            f"({_n(c.get('calls'))} calls)")


def _rows(label: str, lines: list[str]) -> list[str]:
    return [f"{label if i == 0 else '':{LABEL}} {line}" for i, line in enumerate(lines or ["—"])]


def usage_lines(u: dict[str, Any]) -> list[str]:
    lines = [f"today ({u.get('day', '?')}): {counts_line(u.get('today') or {})}",
             f"total: {counts_line(u.get('total') or {})}"]
    if "sinceStart" in u:
        lines.append(f"since start: {counts_line(u['sinceStart'])}")
    one = u.get("session")
    if one:
        lines.append(f"session {one['session']} today: {counts_line(one.get('today') or {})}")
        lines.append(f"session {one['session']} total: {counts_line(one.get('total') or {})}")
    for s in u.get("topSessions") or []:
        today = s.get("today") or {}
        lines.append(f"top session {s['session'] or '(none)'}: {_n(s.get('input_tokens'))} in, {_n(s.get('output_tokens'))} out "
                     f"({_n(s.get('calls'))} calls); today {_n(today.get('input_tokens'))} in, {_n(today.get('output_tokens'))} out")
    return lines


def provider_lines(providers: list[dict[str, Any]]) -> list[str]:
    out = []
    for p in providers:
        line = f"{p['name']}: {p['state'].replace('_', '-')}"
        if p.get("state") == "open" and p.get("retryAt"):
            line += f", next try {time.strftime('%H:%M:%S', time.localtime(p['retryAt']))}"
        if p.get("failures"):
            line += f", {p['failures']} failed call(s) in a row"
            if p.get("lastError"):
                line += f" (last: {p['lastError']})"
        out.append(line)
    return out


# `status` keys shown under another label than their camelCase name split into words
LABELS = {"channels": "channels", "channelStates": "chat channels", "providers": "breakers", "execMounts": "exec mounts",
          "fleetCalls": "platform calls"}


def duration(seconds: Any) -> str:
    """`3 min 12 s`, `2 h 5 min`, `4 d 3 h`: an uptime a person reads at a glance."""
    if not isinstance(seconds, (int, float)):
        return "—"
    s = int(seconds)
    if s < 60:
        return f"{seconds:.1f} s" if seconds < 10 else f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60} s"
    if s < 86400:
        return f"{s // 3600} h {s % 3600 // 60} min"
    return f"{s // 86400} d {s % 86400 // 3600} h"


def label(key: str) -> str:
    return LABELS.get(key) or re.sub(r"(?<=[a-z0-9])([A-Z])", lambda m: " " + m.group(1).lower(), key)


def human(value: Any) -> str:
    """Any other status value as text: never a Python repr (`['gateway']`, `{'inboxOpen': 0}`)."""
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, (list, tuple, set)):
        return ", ".join(human(v) for v in value) or "none"
    if isinstance(value, dict):
        return ", ".join(f"{label(str(k))} {human(v)}" for k, v in value.items()) or "none"
    return str(value)


def queue_line(q: dict[str, Any]) -> str:
    line = (f"{q.get('inboxOpen', 0)} message(s) being worked on or waiting, "
            f"{q.get('outboxPending', 0)} answer(s) waiting to be delivered")
    rest = {k: v for k, v in q.items() if k not in ("inboxOpen", "outboxPending")}
    return line + (f"; {human(rest)}" if rest else "")


def status_lines(status: dict[str, Any]) -> list[str]:
    out: list[str] = []
    for key, value in status.items():
        name = label(key)
        if key == "usage" and isinstance(value, dict):
            out += _rows(name, usage_lines(value))
        elif key == "providers" and isinstance(value, list):
            out += _rows(name, provider_lines(value))
        elif key == "mcp" and isinstance(value, dict):
            out += _rows(name, mcp_lines(value))
        elif key == "channelStates" and isinstance(value, dict):
            out += _rows(name, channel_lines(value))
        elif key == "hooks" and isinstance(value, list):  # inbound webhooks and watched mailboxes (docs/hooks.md)
            out += _rows(name, hook_lines(value))
        elif key == "fleet" and isinstance(value, dict):
            out += _rows(name, fleet_lines(value))
        elif key == "fleetCalls" and isinstance(value, dict):  # sends through another process's connection
            out.append(f"{name:{LABEL}} forwarded {value.get('forwarded', 0)}, served for others "
                       f"{value.get('served', 0)}")
        elif key == "backgroundJobs" and isinstance(value, list):  # one entry per running job: what, where, how long
            out += _rows(name, [f"{j['id']} in {j['session']}: {j['summary'][:60]} ({duration(j['runningSeconds'])})"
                                for j in value] or ["none"])
        elif key == "uptime":
            out.append(f"{name:{LABEL}} {duration(value)}")
        elif key == "queues" and isinstance(value, dict):
            out.append(f"{name:{LABEL}} {queue_line(value)}")
        elif key == "activeSessions" and isinstance(value, list):
            out.append(f"{name:{LABEL}} {human(value) if value else 'none (nothing running)'}")
        elif key == "clients" and isinstance(value, int):
            out.append(f"{name:{LABEL}} {value} connected")
        elif key in ("sandbox", "execMounts") and isinstance(value, str):
            out.append(f"{name:{LABEL}} {value.removeprefix('exec sandbox: ').removeprefix('exec mounts: ')}")
        else:
            out.append(f"{name:{LABEL}} {human(value)}")
    return out


def hook_lines(hooks: list[dict[str, Any]]) -> list[str]:
    """One line per hook: how it is called, where its answers go, its latest call."""
    import time

    lines = []
    for hook in hooks:
        calls = hook.get("lastCalls") or []
        last = "no call yet"
        if calls:
            latest = calls[0]
            note = f" ({latest['note']})" if latest.get("note") else ""
            last = f"last call {latest['status']}{note} at {time.strftime('%H:%M:%S', time.localtime(latest['at']))}"
        lines.append(f"{hook['name']}: {hook['auth']} -> {hook['deliver']}; {last}")
    return lines


def channel_lines(states: dict[str, Any]) -> list[str]:
    """One line per chat channel: its state, and why when it is not running."""
    lines = []
    for name, s in states.items():
        line = f"{name}: {s.get('state')}"
        if s.get("bot"):
            line += f" as {s['bot']}"
        if s.get("reason") and s.get("state") != "running":
            line += f" ({s['reason']})"
        lines.append(line)
    return lines or ["none"]


def fleet_lines(f: dict[str, Any]) -> list[str]:
    """The fleet as this process sees it (docs/fleet.md): processes, partitions, backlog, singletons."""
    held = f.get("held") or []
    lines = [f"this process: {f.get('node')} on {f.get('redis')}, {len(held)} of {f.get('partitions')} partitions "
             f"({', '.join(map(str, held)) or 'none'}); answered {f.get('answered', 0)}, "
             f"refused {f.get('refusedWrites', 0)} stale write(s)"]
    for p in f.get("processes") or []:
        lines.append(f"process {p['node']}: pid {p['pid']} on {p['host']} port {p['port']}, {p['partitions']} partition(s)")
    lag = f.get("lag") or {}
    lines.append("backlog: " + (", ".join(f"p{n} {depth}" for n, depth in sorted(lag.items(), key=lambda kv: int(kv[0])))
                                or "none"))
    for name, holder in sorted((f.get("singletons") or {}).items()):
        lines.append(f"singleton {name}: {holder or 'nobody (being taken over)'}")
    return lines


def mcp_lines(servers: dict[str, Any]) -> list[str]:
    """One line per MCP server: state, tools, restarts, and why it is down."""
    lines = []
    for name, s in servers.items():
        line = f"{name}: {s.get('state')}, {s.get('tools', 0)} tools, {s.get('restarts', 0)} restarts"
        if s.get("state") == "down":
            line += f", restarting (attempt {s.get('attempt', 1)})"
        if s.get("error"):
            line += f": {s['error']}"
        lines.append(line)
    return lines or ["none"]
