"""Inbound webhooks as triggers: a request checked, turned into a message, and put on the bus.

What is decided here, free of HTTP (the listener is gateway/hooks_server.py): whether the caller
holds the hook's secret (a bearer token, or an HMAC-SHA256 signature of the body in GitHub's or
Stripe's format, compared in constant time); the delivery's id (a header the sender sets, else the
body's hash), which makes a repeated delivery one run through the inbox's unique ids; the message
the template renders from the request; and the InboundMessage that carries it, like a cron job's:
its own channel name ("hook"), the hook's session, `deliver` metadata, acting for the owner who
configured it. The request is somebody else's words, so the rendered text is wrapped as untrusted
data and the run starts tainted (agent/trust/): its lasting effects wait for the owner's approval.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import math
import re
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Mapping
from urllib.parse import parse_qsl

from clawgate.agent.bus import InboundMessage
from clawgate.agent.session import InvalidSessionKey, check_session_key
from clawgate.agent.trust.untrusted import wrap_untrusted
from clawgate.config.agents import AGENT_PREFIX, Roster, UnknownAgent
from clawgate.config.hooks import HookSettings, compile_template
from clawgate.config.loader import ConfigError

from .jobs import CronError, parse_deliver, resolve_deliver

log = logging.getLogger(__name__)
CHANNEL = "hook"          # the channel name of a hook's runs (agent/loop.py INTERNAL_CHANNELS)
MAX_TEXT = 20_000         # the rendered message is cut here (the request itself is limited by max_body_bytes)
MAX_ID = 200              # a sender's delivery id longer than this is hashed
RECENT = 10               # calls kept per hook for the status
_PLAIN_ID = re.compile(rf"[\w.:@+=/-]{{1,{MAX_ID}}}", re.ASCII)
_HEX_DIGEST = re.compile(r"[0-9a-fA-F]{64}")
_GITHUB_SIGNATURE = re.compile(r"(?i:sha256)=[0-9a-fA-F]{64}")
HIDDEN_HEADERS = ("authorization", "cookie", "proxy-authorization")  # never in the agent's message


class HookRefused(Exception):
    """A request the hook does not take: the HTTP status and a reason for the log (never the body)."""

    def __init__(self, status: int, reason: str, retry_after: float | None = None) -> None:
        super().__init__(reason)
        self.status, self.reason, self.retry_after = status, reason, retry_after


@dataclass
class Bucket:
    """Token bucket per hook: `burst` calls at once, refilled at `rate` per second."""

    rate: float
    burst: int
    tokens: float = -1.0
    at: float = 0.0

    def take(self, now: float) -> float:
        """0 when a call may go ahead (one token taken), else the seconds until one may."""
        if self.tokens < 0:
            self.tokens, self.at = float(self.burst), now
        self.tokens = min(float(self.burst), self.tokens + (now - self.at) * self.rate)
        self.at = now
        if self.tokens >= 1.0:
            self.tokens -= 1.0
            return 0.0
        return (1.0 - self.tokens) / self.rate


class FailedAuth:
    """Failed authentications per remote address, a token bucket each: `burst` failures at once, then
    `per_minute`. An address past it is refused (429) before its request's body is read, so guessing
    secrets costs the guesser time and the daemon nothing. At most `addresses` are tracked (the
    longest-quiet forgotten first): a flood from many addresses cannot grow the table."""

    def __init__(self, *, burst: int = 20, per_minute: float = 20.0, addresses: int = 4096) -> None:
        self.burst, self.rate, self.addresses = burst, per_minute / 60.0, addresses
        self._buckets: dict[str, Bucket] = {}

    def wait(self, address: str, now: float) -> float:
        """0 when `address` may still try, else the seconds until it may."""
        bucket = self._buckets.get(address)
        if bucket is None or bucket.tokens < 0:
            return 0.0
        tokens = min(float(self.burst), bucket.tokens + (now - bucket.at) * self.rate)
        return 0.0 if tokens >= 1.0 else (1.0 - tokens) / self.rate

    def failed(self, address: str, now: float) -> None:
        """One more failure of `address` (it moves to the end: the most recent)."""
        bucket = self._buckets.pop(address, None) or Bucket(rate=self.rate, burst=self.burst)
        bucket.take(now)
        self._buckets[address] = bucket
        while len(self._buckets) > self.addresses:
            del self._buckets[next(iter(self._buckets))]


@dataclass
class Call:
    """One call of a hook, as the status shows it."""

    at: float
    status: int
    id: str = ""
    note: str = ""

    def public(self) -> dict[str, Any]:
        return {"at": self.at, "status": self.status, "id": self.id or None, "note": self.note or None}


@dataclass
class Hook:
    name: str
    settings: HookSettings
    template: Any
    deliver: str | None
    bucket: Bucket
    calls: deque[Call] = field(default_factory=lambda: deque(maxlen=RECENT))
    agent_prefix: str = ""  # `agent:<id>:` when the hook names an agent other than the default

    @property
    def session(self) -> str:
        return self.agent_prefix + self.settings.session_key(self.name)

    def public(self) -> dict[str, Any]:
        """What the status shows of a hook: no secret, its target and its last calls."""
        s = self.settings
        auth = "bearer token" if s.token else f"hmac ({s.signature_scheme})"
        if s.kind == "imap":
            auth = f"mailbox {(s.imap or {}).get('imap_folder', 'INBOX')} on {(s.imap or {}).get('imap_host')}"
        return {"name": self.name, "enabled": s.enabled, "kind": s.kind, "auth": auth,
                "session": self.session, "deliver": self.deliver or "none", "agent": s.agent,
                "lastCalls": [c.public() for c in reversed(self.calls)]}


def build_hooks(tables: Mapping[str, HookSettings], roster: Roster | None = None) -> dict[str, Hook]:
    """The enabled hooks, their templates compiled and delivery targets parsed as a cron job's; a target,
    session or agent the daemon cannot use is a ConfigError (one line, at start). A hook naming an agent
    other than the default runs in that agent's sessions (`agent:<id>:hooks:<name>`), as a chat routed to it."""
    hooks: dict[str, Hook] = {}
    for name, s in tables.items():
        if not s.enabled:
            continue
        prefix = ""
        if s.agent:
            if roster is None:
                raise ConfigError(f"config error: hooks.{name}.agent: this daemon runs one agent (no [agents.*] in "
                                  "config.toml); remove the key or add the agent")
            try:
                agent = roster.get(s.agent)
            except UnknownAgent as exc:
                raise ConfigError(f"config error: hooks.{name}.agent: {exc}") from None
            prefix = "" if agent.default else f"{AGENT_PREFIX}{agent.id}:"
        try:
            deliver = parse_deliver(s.deliver)
        except CronError as exc:
            raise ConfigError(f"config error: hooks.{name}.deliver: {exc.message}") from None
        try:
            check_session_key(s.session_key(name))
        except InvalidSessionKey as exc:
            raise ConfigError(f"config error: hooks.{name}.session: {exc.message}") from None
        hooks[name] = Hook(name, s, compile_template(s.message), deliver,
                           Bucket(rate=s.rate_per_minute / 60.0, burst=s.burst), agent_prefix=prefix)
    return hooks


# who is calling ---------------------------------------------------------------------------------
def _hmac_hex(secret: str, payload: bytes) -> str:
    return hmac.new(secret.encode(), payload, hashlib.sha256).hexdigest()


def precheck(s: HookSettings, headers: Mapping[str, str]) -> None:
    """Raise HookRefused(401) for what the headers alone show, before a byte of the body is read: a
    bearer call is decided here entirely; a signed call must carry a well-formed signature header
    (its match with the body is `verify`'s, once the body is in). A caller without the secret so
    never makes the daemon wait for, buffer or hash a body."""
    if s.token is not None:
        given = headers.get("Authorization", "")
        scheme, _, value = given.partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(value.strip().encode(), s.token.encode()):
            raise HookRefused(401, "no valid bearer token")
        return
    signature = headers.get(s.header, "")
    if not signature:
        raise HookRefused(401, f"no {s.header} header")
    if s.signature_scheme == "github":
        if not _GITHUB_SIGNATURE.fullmatch(signature.strip()):
            raise HookRefused(401, f"{s.header} is not sha256=<64 hex digits>")
        return
    parts = [p.strip().partition("=") for p in signature.split(",")]
    stamps = [v for k, _, v in parts if k == "t"]
    signed = [v for k, _, v in parts if k == "v1"]
    if len(stamps) != 1 or not stamps[0].isascii() or not stamps[0].isdigit() or not signed \
            or not all(_HEX_DIGEST.fullmatch(v) for v in signed):
        raise HookRefused(401, f"{s.header} is not t=<time>,v1=<signature>")


def verify(s: HookSettings, headers: Mapping[str, str], body: bytes, now: float) -> None:
    """Raise HookRefused(401) unless the request carries the hook's secret; every comparison in constant time."""
    if s.token is not None:
        precheck(s, headers)  # a bearer token is all in the header
        return
    assert s.hmac_secret is not None
    signature = headers.get(s.header, "")
    if not signature:
        raise HookRefused(401, f"no {s.header} header")
    if s.signature_scheme == "github":
        algorithm, _, digest = signature.strip().partition("=")
        if algorithm.lower() != "sha256" or not hmac.compare_digest(digest.lower().encode(),
                                                                    _hmac_hex(s.hmac_secret, body).encode()):
            raise HookRefused(401, f"{s.header} does not match the body")
        return
    parts = [p.strip().partition("=") for p in signature.split(",")]
    stamps = [v for k, _, v in parts if k == "t"]
    signed = [v.lower() for k, _, v in parts if k == "v1"]
    try:
        stamp = int(stamps[0]) if len(stamps) == 1 else None
    except ValueError:
        stamp = None
    if stamp is None or not signed:
        raise HookRefused(401, f"{s.header} is not t=<time>,v1=<signature>")
    expected = _hmac_hex(s.hmac_secret, str(stamp).encode() + b"." + body).encode()
    if not any(hmac.compare_digest(v.encode(), expected) for v in signed):  # a rolled secret: several v1
        raise HookRefused(401, f"{s.header} does not match the body")
    if abs(now - stamp) > s.tolerance_seconds:  # checked after the signature: a forged time tells nothing
        raise HookRefused(401, f"{s.header} was signed {abs(now - stamp):.0f} s from now, past the "
                               f"{s.tolerance_seconds:g} s tolerance (a replay, or a clock off)")


def sign(s: HookSettings, body: bytes, now: float) -> dict[str, str]:
    """The headers a sender would add to prove it holds the secret (`clawgate hooks test`)."""
    if s.token is not None:
        return {"Authorization": f"Bearer {s.token}"}
    assert s.hmac_secret is not None
    if s.signature_scheme == "github":
        return {s.header: "sha256=" + _hmac_hex(s.hmac_secret, body)}
    stamp = int(now)
    return {s.header: f"t={stamp},v1={_hmac_hex(s.hmac_secret, str(stamp).encode() + b'.' + body)}"}


def delivery_id(s: HookSettings, headers: Mapping[str, str], body: bytes) -> str:
    """The delivery's own id (the sender's header), else the body's SHA-256: the same twice is one run."""
    given = headers.get(s.id_header, "").strip() if s.id_header else ""
    if given:
        return plain_id(given)
    return "body-" + hashlib.sha256(body).hexdigest()


def plain_id(given: str) -> str:
    """A sender's id as it is when plain, else its hash: it goes into clawgate's own line above the
    message, so nothing in it may pass for words (a space, a bracket, a line break)."""
    return given if _PLAIN_ID.fullmatch(given) else "sha256-" + hashlib.sha256(given.encode()).hexdigest()


# what the agent is told ---------------------------------------------------------------------------
def parse_body(body: bytes, content_type: str) -> tuple[Any, str]:
    """(fields for the template, the body as text): a JSON body's value, a form's fields (GitHub's
    form deliveries carry their JSON in `payload`), else nothing but the text."""
    raw = body.decode("utf-8", errors="replace")
    kind = content_type.split(";")[0].strip().lower()
    if kind == "application/x-www-form-urlencoded":
        form = dict(parse_qsl(raw, keep_blank_values=True))
        if set(form) == {"payload"}:
            try:
                return json.loads(form["payload"]), raw
            except ValueError:
                pass
        return form, raw
    try:
        return json.loads(raw), raw
    except ValueError:
        if kind.endswith("json"):
            raise HookRefused(400, "the body is not valid JSON") from None
        return {}, raw


def render(hook: Hook, fields: Any, raw: str, headers: Mapping[str, str], query: Mapping[str, str]) -> str:
    """The hook's template over the request; a template that fails on this request says so and gives the body."""
    hidden = {*HIDDEN_HEADERS, hook.settings.header.lower()}  # the caller's secret stays out of the conversation
    try:
        text = hook.template.render(body=fields, headers={k.lower(): v for k, v in headers.items() if k.lower() not in hidden},
                                    query=dict(query), raw=raw, hook=hook.name)
    except Exception as exc:  # the sandbox refusing, a filter on the wrong type: the call is not lost
        log.warning("hook %s: the message template failed on this request (%s); the raw body is used",
                    hook.name, type(exc).__name__)
        text = f"(the hook's message template failed on this request: {type(exc).__name__}; the body as sent:)\n{raw}"
    if len(text) > MAX_TEXT:
        text = text[:MAX_TEXT] + f"\n… (cut at {MAX_TEXT} characters)"
    return text


def inbound(hook: Hook, text: str, delivery: str, now: float) -> InboundMessage:
    """The run's message: a line of clawgate's own saying where it came from, then the request's words as data."""
    deliver = resolve_deliver(hook.deliver, hook.session)
    where = f"{deliver['channel']}:{deliver['chat_id']}" if deliver else "nowhere (kept in the hook's history)"
    source = f"webhook {hook.name}"
    head = (f"[webhook \"{hook.name}\" · delivery {delivery} · received "
            f"{time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime(now))} · your reply is delivered to {where}]")
    agent = {"agent": hook.settings.agent} if hook.settings.agent else {}
    return InboundMessage(channel=CHANNEL, chat_id=hook.name, sender_id=f"hook:{hook.name}", session_key=hook.session,
                          text=f"{head}\n{wrap_untrusted(source, text)}", id=f"hook:{hook.name}:{delivery}",
                          received_at=now,
                          metadata={"mode": "normal", "deliver": deliver, "owner": True, "tainted": source,
                                    "hook": {"name": hook.name, "delivery": delivery}, **agent})


def retry_after(seconds: float) -> int:
    """Retry-After is whole seconds; never 0 for a refused call."""
    return max(1, math.ceil(seconds))
