"""The chat channels' checks for `clawgate doctor`: every `[channels.<name>]` section names an installed
channel and validates against its adapter's settings, and, when a daemon runs, each enabled channel's
state there (running / standby in a fleet / retrying / failed with the reason)."""

from __future__ import annotations

from typing import Any, Callable

from clawgate.config.paths import Paths
from clawgate.config.schema import Settings

Found = tuple[str, str, str, str]  # (name, status, detail, fix): doctor.Check's fields


def daemon_states(paths: Paths, settings: Settings) -> dict[str, Any] | None:
    """The running daemon's channel states; None when no gateway answers."""
    from clawgate.config.token import gateway_token

    from .cli.errors import CliError
    from .cli.remote import Target, _NothingListening, _talk
    from .client import gateway_url

    t = Target(paths, settings, gateway_url(settings), gateway_token(paths, settings))
    try:
        status = _talk(t, lambda client: client.request("status", {}), None)
    except (_NothingListening, CliError, OSError):
        return None
    states = status.get("channelStates") if isinstance(status, dict) else None
    return states if isinstance(states, dict) else {}


def check_channels(paths: Paths, settings: Settings,
                   states: Callable[[Paths, Settings], dict[str, Any] | None] = daemon_states) -> list[Found]:
    from clawgate.channels.kit.registry import ChannelConfigError, check_sections, installed, load, validate

    found = installed()
    sections = settings.channels.sections()
    try:
        check_sections(sections, found)
        for name, table in sections.items():
            validate(load(name, found), name, table)
    except ChannelConfigError as exc:
        return [("channels", "fail", str(exc), "fix or remove the [channels] section it names")]
    running = states(paths, settings)
    if running is None:
        return [("channels", "ok", f"installed: {', '.join(sorted(found)) or 'none'}; daemon not running", "")]
    out: list[Found] = []
    for name, state in running.items():
        what, reason = state.get("state"), state.get("reason") or ""
        if what == "running":
            out.append((f"ch {name}", "ok", "running" + (f" as {state['bot']}" if state.get("bot") else ""), ""))
        elif what == "standby":  # a fleet: another process holds this bot's connection; sends go through it
            out.append((f"ch {name}", "ok", f"standby ({reason})", ""))
        elif what == "failed":
            out.append((f"ch {name}", "fail", f"failed: {reason}", f"fix channels.{name} as it says, then restart"))
        else:
            out.append((f"ch {name}", "warn", f"{what}" + (f": {reason}" if reason else ""),
                        "check the network and the platform's status; it is retried with backoff"))
    return out or [("channels", "ok", "no chat channel enabled", "")]
