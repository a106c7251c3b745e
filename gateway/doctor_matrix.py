"""`clawgate doctor`'s Matrix line: the section is valid, the homeserver answers, the token is the
bot's, and — always said when the channel is on — whether encrypted rooms are read (end-to-end
encryption on) or not (`encryption = false`, or vodozemac missing: the rooms met are listed).

Why its own module: like doctor_mcp.py, one channel's probe (HTTP to the homeserver, the channel's
rows in the state database) kept out of the general checks.
"""

from __future__ import annotations

import sqlite3
from typing import Any

import httpx
from pydantic import ValidationError

from clawgate.config.paths import Paths

HTTP_SECONDS = 10.0
NOT_SUPPORTED = "end-to-end encrypted rooms cannot be read"


def _section(settings: Any) -> dict[str, Any] | None:
    sections = getattr(settings.channels, "sections", None)
    found = sections().get("matrix") if callable(sections) else None
    return dict(found) if found is not None else None


def _encrypted_rooms(paths: Paths) -> list[str]:
    """The encrypted rooms the running bot met (the adapter records them), read-only from the state db."""
    from clawgate.channels.matrix.adapter import ENCRYPTED_ROOMS, encrypted_rooms

    if not paths.database.exists():
        return []
    try:
        db = sqlite3.connect(f"file:{paths.database}?mode=ro", uri=True, timeout=2)
        try:
            row = db.execute("SELECT value FROM channel_state WHERE channel='matrix' AND key=?",
                             (f"kv:{ENCRYPTED_ROOMS}",)).fetchone()
        finally:
            db.close()
    except sqlite3.Error:
        return []
    return encrypted_rooms(row[0] if row else None)


def check_matrix(paths: Paths, settings: Any, offline: bool) -> list[tuple[str, str, str, str]]:
    """[(name, status, detail, fix)] for the Matrix channel; no line at all when it is not configured."""
    section = _section(settings)
    if section is None or section.get("enabled") in (False, "false"):
        return []
    return [_check(paths, section, offline)]


def _check(paths: Paths, section: dict[str, Any], offline: bool) -> tuple[str, str, str, str]:
    try:
        from clawgate.channels.matrix.settings import MatrixSettings
    except ImportError:
        return ("matrix", "fail", "[channels.matrix] is set but matrix-nio is not installed",
                "pip install 'clawgate[matrix]'")
    try:
        matrix = MatrixSettings.model_validate(section)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = "".join(f".{p}" for p in first.get("loc", ()))
        return ("matrix", "fail", f"channels.matrix{where}: {first['msg']}", "edit [channels.matrix] in config.toml")
    from clawgate.channels.matrix.adapter import e2e_available

    rooms = _encrypted_rooms(paths)
    if matrix.encryption and e2e_available():
        e2e = "end-to-end encrypted rooms are read (keys in state/matrix-e2e)"
    elif rooms:
        e2e = f"{NOT_SUPPORTED} (the bot said so in: {', '.join(rooms)})"
    else:
        e2e = f"{NOT_SUPPORTED} ({'encryption = false' if not matrix.encryption else 'vodozemac missing'}; none met so far)"
    status, detail, fix = "ok", f"{matrix.user_id} on {matrix.homeserver}", ""
    if not offline:
        status, detail, fix = _probe(matrix)
    if rooms and status == "ok":
        status, fix = "warn", "talk to the bot in rooms without encryption"
    return ("matrix", status, f"{detail}; {e2e}", fix)


def _probe(matrix: Any) -> tuple[str, str, str]:
    """The homeserver answers /versions; an access token is the bot's (a password is not tried: no new device)."""
    base = matrix.homeserver
    try:
        versions = httpx.get(f"{base}/_matrix/client/versions", timeout=HTTP_SECONDS)
        if versions.status_code != 200:
            return ("fail", f"{base} answered /versions with HTTP {versions.status_code}",
                    "check channels.matrix.homeserver (the client API's base URL)")
        if matrix.access_token is None:
            return ("ok", f"{matrix.user_id} on {base} (password login, not tried here)", "")
        token = matrix.access_token.get_secret_value()
        who = httpx.get(f"{base}/_matrix/client/v3/account/whoami", timeout=HTTP_SECONDS,
                        headers={"Authorization": f"Bearer {token}"})
    except httpx.HTTPError as exc:
        return ("fail", f"cannot reach {base}: {type(exc).__name__}", "check the network and channels.matrix.homeserver")
    if who.status_code == 401:
        return ("fail", "the homeserver refused the access token", "create a new access token for the bot account")
    user = who.json().get("user_id") if who.status_code == 200 else None
    if user != matrix.user_id:
        return ("fail", f"the access token belongs to {user}, not {matrix.user_id}", "fix user_id or the token")
    return ("ok", f"{matrix.user_id} on {base}", "")
