"""The settings every chat channel shares: who may talk to the agent, files, sending, progress.

Each channel's `[channels.<name>]` section is its adapter's settings model, a subclass of
AccessSettings with its own tokens added, so every channel is configured the same way. Lives in
the config layer (not in the channel kit) so the built-in Telegram section can be part of the
settings schema; the kit re-exports it (clawgate.channels.kit.AccessSettings).
"""

# No `from __future__ import annotations` here: pydantic would compile every field's annotation text at each start.

import json
import re
import types
import typing
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

DmPolicy = Literal["pairing", "allowlist", "open", "disabled"]
GroupPolicy = Literal["mention", "allowlist", "open", "disabled"]
DEFAULT_MAX_FILE_BYTES = 20 * 1024 * 1024
# Several bot accounts per channel (`[channels.<name>.accounts.<account>]`, docs/channels.md): an account's
# name goes into the channel's name (`telegram.work`), its session keys and delivery targets, so it is
# kept to characters every one of those allows.
DEFAULT_ACCOUNT = "default"
ACCOUNT_NAME = re.compile(r"^[a-z][a-z0-9_-]{0,31}$")
ACCOUNT_NAME_RULE = "lowercase letters, digits, '-' and '_', starting with a letter, at most 32"


def channel_name(platform: str, account: str) -> str:
    """The name a channel's account runs under: `telegram` for the default account, `telegram.work` otherwise
    (in `clawgate channels`, status, session keys `telegram.work:<chat>`, delivery targets, pairing)."""
    return platform if account == DEFAULT_ACCOUNT else f"{platform}.{account}"


def split_channel_name(name: str) -> tuple[str, str]:
    """(platform, account) of a channel's name: `telegram.work` -> (telegram, work), `telegram` -> (telegram, default)."""
    platform, dot, account = name.partition(".")
    return (platform, account) if dot else (platform, DEFAULT_ACCOUNT)


class AccessSettings(BaseModel):
    """The kit's keys (docs/channels.md has the access matrix)."""

    # Unknown keys are errors: a typo in config.toml must not be silently ignored.
    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    @model_validator(mode="before")
    @classmethod
    def _json_from_environment(cls, data: Any) -> Any:
        """`CLAWGATE_CHANNELS__DISCORD__OWNER='["42"]'`: a section the schema does not type (every channel
        but Telegram) reaches its model as text; lists and tables are JSON in the environment, as everywhere."""
        if not isinstance(data, dict):
            return data
        out = dict(data)
        for name, value in data.items():
            field = cls.model_fields.get(name)
            if field is None or not isinstance(value, str) or not value.lstrip().startswith(("[", "{")):
                continue
            annotation = field.annotation
            union = typing.get_origin(annotation) in (typing.Union, types.UnionType)
            kinds = typing.get_args(annotation) if union else (annotation,)
            if any((typing.get_origin(kind) or kind) in (list, dict, tuple, set) for kind in kinds):
                try:
                    out[name] = json.loads(value)
                except ValueError:
                    pass  # left as it is: the model refuses it with its own one-line message
        return out

    enabled: bool | None = None  # None: on when the section is there (Telegram: when a token is set)
    base_url: str | None = Field(None, description="the platform's API base (a proxy, a test server); empty: the platform's own")
    # The person this agent works for (user ids or @usernames): always admitted, the only ones who may
    # approve risky tool calls. Paired and listed users are guests.
    owner: list[str] = Field(default_factory=list)
    allow_from: list[str] = Field(default_factory=list)
    dm_policy: DmPolicy = "pairing"
    # Groups read only messages that address the bot (a mention, a reply to it, a command), whatever
    # the policy; the policy says whose: "mention" = whoever the DM rules admit (owners, allow_from,
    # paired users; everyone when dm_policy is "open"), "allowlist" = owners, allow_from and paired
    # users only, "open" = anyone in the group, "disabled" = nobody (owners neither).
    group_policy: GroupPolicy = "mention"
    max_file_bytes: int = Field(DEFAULT_MAX_FILE_BYTES, ge=1, description="largest file accepted from a user")
    files_dir: str = Field("inbox", min_length=1, description="workspace folder for files users send")
    send_retries: int = Field(3, ge=0, le=10, description="retries of a send that provably did not reach the platform")
    retry_base_seconds: float = Field(1.0, ge=0)
    max_retry_after_seconds: float = Field(120.0, ge=0, description=(
        "a rate limit asking to wait longer than this hands the reply back to the dispatcher"))
    typing_interval_seconds: float = Field(5.0, gt=0)
    progress: bool = Field(True, description="show a status message with the current tool step while working")
    progress_interval_seconds: float = Field(2.0, ge=0, description="minimum time between edits of the status message")
    pairing_ttl_seconds: float = Field(3600.0, gt=0)
    pairing_max_pending: int = Field(50, ge=1, le=10_000, description=(
        "pending pairing codes kept at once; when full the oldest is replaced, never a new requester refused"))
    pairing_request_interval_seconds: float = Field(600.0, ge=0, description=(
        "a user whose pending code was replaced by newer requests gets a new one only this long after the first"))
    pairing_check_seconds: float = Field(2.0, gt=0, description="how often approvals made by the CLI are noticed")
    # `[channels.<name>.accounts.<account>]`: more bot accounts of this channel, each the section's keys
    # overlaid by its own table (channels/kit/accounts.py validates them with this model)
    accounts: dict[str, Any] = Field(default_factory=dict, description=(
        "more bot accounts of this channel: name -> its keys over the section's (docs/channels.md)"))
