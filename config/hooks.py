"""Settings of inbound webhooks (`[hooks.<name>]`), kept beside schema.py (docs/hooks.md).

A hook is an HTTP endpoint anyone on the network may call, so every table must name how a caller
proves it is the sender: a bearer `token`, or an `hmac_secret` whose signature of the body the
sender puts in a header (GitHub's `X-Hub-Signature-256: sha256=<hex>`, or Stripe's timestamped
`t=<unix>,v1=<hex>`). The message template is compiled here, in jinja2's sandbox, so a broken
template stops the daemon at load with one line instead of failing on the first call.
"""

# No `from __future__ import annotations` here: pydantic would compile every field's annotation text at each start.

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

HOOK_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
DEFAULT_MESSAGE = "{{ raw }}"
# A watched mailbox's keys (kind "imap"): the email channel's IMAP settings, read by its own model
# (channels/email/settings.py) when the daemon starts.
IMAP_KEYS = frozenset({"imap_host", "imap_port", "imap_tls", "imap_folder", "username", "password", "ca_file",
                       "idle_seconds", "poll_seconds", "timeout_seconds", "max_message_bytes"})
# The schemes' usual headers, used when signature_header is not set.
SIGNATURE_HEADERS = {"github": "X-Hub-Signature-256", "stripe": "Stripe-Signature"}


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


def compile_template(source: str) -> Any:
    """The message template in jinja2's sandbox: fields of a missing object render empty (chained
    lookups too), nothing outside the request is reachable. Raises ValueError with one line."""
    from jinja2 import ChainableUndefined, TemplateSyntaxError
    from jinja2.sandbox import SandboxedEnvironment

    env = SandboxedEnvironment(undefined=ChainableUndefined, autoescape=False, keep_trailing_newline=False)
    try:
        return env.from_string(source)
    except TemplateSyntaxError as exc:
        raise ValueError(f"the template does not parse (line {exc.lineno}: {exc.message}); "
                         "write fields as {{ body.status }}, {{ headers['x-github-event'] }}, {{ query.ref }}") from None


class HookSettings(_Section):
    """One `[hooks.<name>]` table: who may call it, what the agent is told, where the answer goes."""

    enabled: bool = True
    kind: Literal["http", "imap"] = Field("http", description=(
        "http: an endpoint called with POST /hooks/<name>; imap: a watched mailbox whose new mail is a call (IMAP IDLE)"))
    imap: dict[str, Any] | None = Field(None, description=(
        "kind imap: the mailbox, with the email channel's keys imap_host, imap_port, imap_tls, imap_folder, "
        "username, password, ca_file, idle_seconds, poll_seconds, timeout_seconds, max_message_bytes"))
    token: str | None = Field(None, min_length=16, description="bearer secret: callers send Authorization: Bearer <token>")
    hmac_secret: str | None = Field(None, min_length=8, description="the shared secret the sender signs the body with")
    signature_scheme: Literal["github", "stripe"] = Field("github", description=(
        "github: <header>: sha256=<hex HMAC-SHA256 of the body>; stripe: <header>: t=<unix time>,v1=<hex HMAC-SHA256 "
        "of '<t>.<body>'>, refused when older than tolerance_seconds"))
    signature_header: str | None = Field(None, min_length=1, max_length=100, pattern=r"^[A-Za-z0-9-]+$", description=(
        "header carrying the signature; default X-Hub-Signature-256 (github) or Stripe-Signature (stripe)"))
    tolerance_seconds: float = Field(300.0, gt=0, le=86_400, description="stripe: how old a signed timestamp may be")
    message: str = Field(DEFAULT_MESSAGE, min_length=1, max_length=20_000, description=(
        "what the agent is told: a template over body (JSON fields or form fields), headers (lower-case names), "
        "query and raw (the body as text); missing fields render empty"))
    session: str | None = Field(None, min_length=1, max_length=200, description="the session the run happens in; default hooks:<name>")
    agent: str | None = Field(None, min_length=1, max_length=100, description="the agent that answers (kept with the call)")
    # as a cron job's delivery (agent/triggers/jobs.py parse_deliver, checked when the daemon starts)
    deliver: str | None = Field(None, max_length=232, description=(
        "where the answer goes: <channel>:<chat id> (telegram:123456), gateway[:<session>], or none (history only)"))
    id_header: str | None = Field(None, min_length=1, max_length=100, pattern=r"^[A-Za-z0-9-]+$", description=(
        "header naming each delivery (X-GitHub-Delivery, Idempotency-Key): a repeated id is one run; "
        "without it (or when a request lacks it) the body's SHA-256 is the id"))
    max_body_bytes: int = Field(256 * 1024, ge=1, le=16 * 1024 * 1024, description="larger requests are refused (413)")
    rate_per_minute: float = Field(60.0, gt=0, le=60_000, description="accepted calls per minute, on average")
    burst: int = Field(10, ge=1, le=10_000, description="calls accepted at once before rate_per_minute applies (then 429)")

    @field_validator("message")
    @classmethod
    def _template(cls, value: str) -> str:
        compile_template(value)
        return value

    @model_validator(mode="after")
    def _one_secret(self) -> "HookSettings":
        if self.kind == "imap":
            if self.token is not None or self.hmac_secret is not None:
                raise ValueError("a mailbox hook (kind imap) takes no token or hmac_secret: its secret is the mailbox's password")
            if not self.imap:
                raise ValueError("kind imap needs an imap table: imap = { imap_host = \"…\", username = \"…\", password = \"…\" }")
            unknown = sorted(set(self.imap) - IMAP_KEYS)
            if unknown:
                raise ValueError(f"unknown imap key {unknown[0]!r}; the keys are {', '.join(sorted(IMAP_KEYS))}")
            missing = [key for key in ("imap_host", "username", "password") if not self.imap.get(key)]
            if missing:
                raise ValueError(f"the imap table needs {', '.join(missing)}")
            return self
        if self.imap is not None:
            raise ValueError("an imap table goes with kind = \"imap\" (a watched mailbox)")
        if (self.token is None) == (self.hmac_secret is None):
            raise ValueError("set either token (a bearer secret of at least 16 characters) or hmac_secret (the "
                             "signing secret), not both or neither")
        if self.token is not None and (self.signature_header is not None or "signature_scheme" in self.model_fields_set):
            raise ValueError("signature_scheme and signature_header go with hmac_secret, not with a bearer token")
        return self

    @property
    def secrets(self) -> list[str]:
        """What must never reach a log line."""
        return [s for s in (self.token, self.hmac_secret, str((self.imap or {}).get("password") or "") or None) if s]

    @property
    def header(self) -> str:
        """The header the signature is read from."""
        return self.signature_header or SIGNATURE_HEADERS[self.signature_scheme]

    def session_key(self, name: str) -> str:
        return self.session or f"hooks:{name}"


def check_hook_names(hooks: dict[str, HookSettings]) -> dict[str, HookSettings]:
    """A hook's name is a path segment (/hooks/<name>) and part of its session's name."""
    for name in hooks:
        if not HOOK_NAME.match(name):
            raise ValueError(f"hook name {name[:40]!r} must be 1-64 letters, digits, '_' or '-'")
    return hooks
