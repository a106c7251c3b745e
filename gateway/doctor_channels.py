"""The chat channels' lines of `clawgate doctor`: one summary line (every `[channels.<name>]` names an
installed channel and validates against its adapter's settings), then one line per enabled channel.

Each enabled channel is probed for real through its adapter's `probe()` (channels/kit/adapter.py: the
platform's client library logs in and says as whom — Telegram getMe, Discord /users/@me, Slack
auth.test, Matrix whoami, email IMAP + SMTP), whether or not a daemon runs, each bounded by
PROBE_SECONDS and all at once. When a daemon runs, its state of the channel (running / standby in a
fleet / retrying / failed with the reason) is added to the same line.
"""

from __future__ import annotations

import asyncio
import inspect
from typing import Any, Callable

from pydantic import BaseModel

from clawgate.config.access import split_channel_name
from clawgate.config.paths import Paths
from clawgate.config.schema import Settings

from .doctor_matrix import matrix_note

Found = tuple[str, str, str, str]  # (name, status, detail, fix): doctor.Check's fields
PROBE_SECONDS = 20.0
SECRET_WORDS = ("token", "secret", "password", "key")
# Facts about one channel beyond its log-in, added to its line: name -> (paths, settings) -> (note, warn fix)
NOTES: dict[str, Callable[[Paths, Any], tuple[str, str]]] = {"matrix": matrix_note}


def daemon_states(paths: Paths, settings: Settings) -> dict[str, Any] | None:
    """The running daemon's channel states; None when no gateway answers."""
    from clawgate.config.token import gateway_token

    from .cli.errors import CliError
    from .cli.remote import Target, _NothingListening, _talk
    from .client import gateway_url
    from .instance import holder_pid

    if holder_pid(paths) is None:  # no gateway runs on this home: whatever holds the port is not ours to ask
        return None
    t = Target(paths, settings, gateway_url(settings), gateway_token(paths, settings))
    try:
        status = _talk(t, lambda client: client.request("status", {}), None)
    except (_NothingListening, CliError, OSError):
        return None
    states = status.get("channelStates") if isinstance(status, dict) else None
    return states if isinstance(states, dict) else {}


def enabled_channels(settings: Settings) -> dict[str, tuple[Any, BaseModel]]:
    """name -> (adapter class, validated settings) of every channel the daemon would start.
    ChannelConfigError (one line) for a section naming no installed channel, or with a bad key."""
    from clawgate.channels.kit.registry import accounts, check_sections, installed, load

    found = installed()
    sections: dict[str, Any] = dict(settings.channels.sections())
    check_sections(sections, found)
    telegram = settings.channels.telegram
    if telegram.enabled is not False and (telegram.token or telegram.enabled) or telegram.accounts:  # as chat_channels
        sections = {"telegram": telegram, **sections}
    out: dict[str, tuple[Any, BaseModel]] = {}
    for name, table in sections.items():
        cls = load(name, found)
        for account, model in accounts(cls, name, table):  # a line per account: telegram, telegram.work
            # Telegram's enabled() logs why a token-less section is off; its probe says it on the line instead
            if account.channel == "telegram" and model is telegram or cls.enabled(model):
                out[account.channel] = (cls, model)
    return out


def check_channels(paths: Paths, settings: Settings, offline: bool = False,
                   states: Callable[[Paths, Settings], dict[str, Any] | None] = daemon_states) -> list[Found]:
    from clawgate.channels.kit.registry import ChannelConfigError, installed

    try:
        wanted = enabled_channels(settings)
    except ChannelConfigError as exc:
        return [("channels", "fail", str(exc), "fix or remove the [channels] section it names")]
    running = states(paths, settings)
    daemon = "daemon not running" if running is None else "daemon running"
    head: Found = ("channels", "ok", f"installed: {', '.join(sorted(installed())) or 'none'}; enabled: "
                   f"{', '.join(wanted) or 'none'}; {daemon}", "" if wanted else "add a [channels.<name>] section")
    probed = {} if offline else asyncio.run(_probe_all(wanted))
    lines = [head]
    for name, (_cls, model) in wanted.items():
        line = _combine(name, probed.get(name), (running or {}).get(name), running is not None)
        note = NOTES.get(split_channel_name(name)[0])
        if note is not None:
            text, fix = note(paths, model)
            line = (name, "warn" if fix and line[1] == "ok" else line[1], f"{line[2]}; {text}", line[3] or fix)
        lines.append(_masked(line, model))
    for name, state in (running or {}).items():  # the daemon runs a channel this config no longer enables
        if name not in wanted and state.get("state") == "failed":
            lines.append((name, "fail", f"daemon: failed: {state.get('reason', '')}", "restart after fixing it"))
    return lines


async def _probe_all(wanted: dict[str, tuple[Any, BaseModel]]) -> dict[str, Any]:
    names = list(wanted)
    results = await asyncio.gather(*(_probe_one(*wanted[name], split_channel_name(name)[1]) for name in names))
    return dict(zip(names, results))


async def _probe_one(cls: Any, model: BaseModel, account: str = "default") -> Any:
    """The adapter's ProbeResult; a hang is a warning, a crash of the probe a failure (one line, no traceback)."""
    from clawgate.channels.kit.probe import ProbeResult

    try:
        # a probe that keeps state per account (WhatsApp's linked session) is told which one
        extra = {"account": account} if "account" in inspect.signature(cls.probe).parameters else {}
        result = await asyncio.wait_for(cls.probe(model, **extra), PROBE_SECONDS)
    except asyncio.TimeoutError:
        return ProbeResult("warn", f"no answer within {PROBE_SECONDS:.0f} s",
                           "check the network and the platform's address; the daemon retries with backoff")
    except Exception as exc:  # a third-party adapter's bug must not hide the other channels' lines
        return ProbeResult("fail", f"the probe failed: {type(exc).__name__}: {exc}", "report it to the channel's author")
    return result if result is not None else ProbeResult("ok", "settings valid (this channel has no log-in probe)")


def _combine(name: str, probed: Any, state: dict[str, Any] | None, daemon_up: bool) -> Found:
    """The probe's verdict, then the daemon's view of the channel when one runs."""
    if probed is None:
        status, detail, fix = "skip", "not logged in to (--offline)", ""
    else:
        status, detail, fix = probed.status, probed.detail, probed.fix
    if not daemon_up:
        return (name, status, detail, fix)
    what, reason = (state or {}).get("state", "not started"), (state or {}).get("reason") or ""
    if what in ("running", "standby"):  # standby: a fleet, another process holds this bot's connection
        return (name, status, f"{detail}; daemon: {what}" + (f" ({reason})" if reason else ""), fix)
    if what == "failed":
        return (name, "fail", f"{detail}; daemon: failed: {reason}",
                fix or f"fix channels.{name} as it says, then restart the daemon")
    more = f"{detail}; daemon: {what}" + (f": {reason}" if reason else "")
    return (name, "fail" if status == "fail" else "warn", more,
            fix or "check the network and the platform's status; the daemon retries with backoff")


def _masked(line: Found, model: BaseModel) -> Found:
    """No secret of the channel's settings in its line, whatever a library put in an error's text."""
    secrets = []
    for key, value in model:
        if any(word in key.lower() for word in SECRET_WORDS) and value:
            text = value.get_secret_value() if hasattr(value, "get_secret_value") else str(value)
            if len(text) >= 6:
                secrets.append(text)
    name, status, detail, fix = line
    for secret in secrets:
        detail, fix = detail.replace(secret, "***"), fix.replace(secret, "***")
    return (name, status, detail, fix)
