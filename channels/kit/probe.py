"""What `clawgate doctor` learns from one real log-in of a channel: the adapter's `probe()` result.

Why in the kit: every adapter reads a platform's answer the same way — a 404 means the base URL
points somewhere that is not the platform's API (not an outage), a 401/403 means the credentials
were refused (the fix names the setting) — so the wording lives once, here, and a new channel
gets it by implementing `PlatformAdapter.probe` with its own client library.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

ProbeStatus = Literal["ok", "warn", "fail"]


@dataclass(frozen=True)
class ProbeResult:
    """One channel's line: ok (logged in, `detail` says as who), warn (not confirmed: an outage,
    a slow server) or fail (a setting is wrong: `fix` names it)."""

    status: ProbeStatus
    detail: str
    fix: str = ""


def logged_in(detail: str) -> ProbeResult:
    return ProbeResult("ok", detail)


def refused(platform: str, what: str, setting: str, how: str = "") -> ProbeResult:
    """The platform refused our credentials: permanent until the setting named is fixed."""
    return ProbeResult("fail", f"{platform} refused the {what}", f"set {setting}" + (f": {how}" if how else ""))


def wrong_base_url(platform: str, url: str, status: int, setting: str) -> ProbeResult:
    """A 404 (or any answer that is not the platform's API): the address is wrong, the platform is not down."""
    return ProbeResult("fail", f"{url} answered HTTP {status}: that is not {platform}'s API",
                       f"check {setting} (or remove it to use the platform's own address)")


def unreachable(platform: str, url: str, reason: str, setting: str) -> ProbeResult:
    """Nothing answered: the network or the platform, retried by the daemon; a warning, not a wrong setting."""
    return ProbeResult("warn", f"cannot reach {platform} at {url}: {reason}",
                       f"check the network and {setting}; the daemon retries with backoff")


def http_status(platform: str, url: str, status: int, *, credential: str, base_setting: str,
                how: str = "") -> ProbeResult | None:
    """The meaning of a failed HTTP answer, or None when `status` is a success."""
    if status < 400:
        return None
    if status in (401, 403):
        return refused(platform, "credentials", credential, how)
    if status in (404, 405):
        return wrong_base_url(platform, url, status, base_setting)
    return ProbeResult("warn", f"{platform} answered HTTP {status} at {url}; not confirmed",
                       "try again later; see the platform's status page")


__all__ = ["ProbeResult", "ProbeStatus", "http_status", "logged_in", "refused", "unreachable", "wrong_base_url"]
