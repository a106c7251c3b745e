"""Plain-text rendering of `status` and `usage` for the terminal (`--json` prints them as they are)."""

from __future__ import annotations

import time
from typing import Any

LABEL = 15


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


def status_lines(status: dict[str, Any]) -> list[str]:
    out: list[str] = []
    for key, value in status.items():
        if key == "usage" and isinstance(value, dict):
            out += _rows("usage", usage_lines(value))
        elif key == "providers" and isinstance(value, list):
            out += _rows("breakers", provider_lines(value))
        elif key == "mcp" and isinstance(value, dict):
            out += _rows("mcp", mcp_lines(value))
        elif key == "channelStates" and isinstance(value, dict):
            out += _rows("chat channels", channel_lines(value))
        elif key == "fleet" and isinstance(value, dict):
            out += _rows("fleet", fleet_lines(value))
        elif key == "fleetCalls" and isinstance(value, dict):  # sends through another process's connection
            out.append(f"{'platform calls':{LABEL}} forwarded {value.get('forwarded', 0)}, served for others "
                       f"{value.get('served', 0)}")
        elif key == "backgroundJobs" and isinstance(value, list):  # one entry per running job: what, where, how long
            jobs = "; ".join(f"{j['id']} in {j['session']}: {j['summary'][:60]} ({j['runningSeconds']:.0f}s)" for j in value)
            out.append(f"{key:{LABEL}} {jobs or 'none'}")
        else:
            out.append(f"{key:{LABEL}} {value}")
    return out


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
