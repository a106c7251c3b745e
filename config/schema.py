"""The settings schema: every key clawgate reads, its default and its bounds.

Defaults are embedded so `clawgate gateway` runs with no config file at all; the
config file and `CLAWGATE_*` environment variables only override them.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class _Section(BaseModel):
    # Unknown keys are errors: a typo in config.toml must not be silently ignored.
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class GatewaySettings(_Section):
    host: str = "127.0.0.1"
    port: int = Field(18789, ge=0, le=65535)
    token: str | None = None
    max_frame_bytes: int = Field(1_048_576, ge=1024)
    send_queue: int = Field(1024, ge=8, description="frames buffered per client before it is dropped as too slow")


class AnthropicSettings(_Section):
    api_key: str | None = None  # normally from ANTHROPIC_API_KEY
    base_url: str | None = None  # normally from ANTHROPIC_BASE_URL
    timeout_seconds: float = Field(120.0, gt=0)
    max_retries: int = Field(4, ge=0, le=20)
    retry_base_seconds: float = Field(1.0, ge=0)
    fallback_models: list[str] = Field(default_factory=list)


class ProviderSettings(_Section):
    anthropic: AnthropicSettings = Field(default_factory=AnthropicSettings)


class AgentSettings(_Section):
    name: str = "Claw"
    model: str = "claude-sonnet-4-5"
    max_tokens: int = Field(4096, ge=1)
    max_iterations: int = Field(40, ge=1, description="model calls per message before the run stops honestly")
    max_concurrent: int = Field(8, ge=1, description="sessions served at the same time")
    context_tokens: int = Field(200_000, ge=1000)
    restate_after_turns: int = Field(20, ge=1)
    workspace: str | None = None  # default: $CLAWGATE_HOME/workspace
    stream: bool = True


class ExecSettings(_Section):
    timeout_seconds: float = Field(30.0, gt=0)
    output_cap_bytes: int = Field(16_000, ge=256)
    # argv[0] values that run without asking the user; everything else needs approval.
    allowlist: list[str] = Field(
        default_factory=lambda: [
            "ls", "cat", "head", "tail", "wc", "grep", "find", "echo", "pwd", "date",
            "python3", "python", "git", "diff", "sort", "uniq", "stat", "du", "true",
        ]
    )


class ToolSettings(_Section):
    exec: ExecSettings = Field(default_factory=ExecSettings)
    read_cap_bytes: int = Field(64_000, ge=256)
    web_fetch_cap_bytes: int = Field(100_000, ge=256)
    approval_timeout_seconds: float = Field(300.0, gt=0)
    # "ask": risky calls wait for the user; "deny": refuse them; "allow": run them (trusted setups only).
    approval_mode: Literal["ask", "deny", "allow"] = "ask"


class TelegramSettings(_Section):
    enabled: bool | None = None  # None: on when a token is present
    token: str | None = None  # normally from TELEGRAM_BOT_TOKEN
    base_url: str | None = None
    allow_from: list[str] = Field(default_factory=list)
    dm_policy: Literal["pairing", "allowlist", "open"] = "pairing"
    poll_timeout_seconds: int = Field(30, ge=0, le=50)


class ChannelSettings(_Section):
    telegram: TelegramSettings = Field(default_factory=TelegramSettings)


class StateSettings(_Section):
    fsync: bool = Field(True, description="fsync durable writes; off trades power-loss safety for speed")


class LogSettings(_Section):
    level: Literal["debug", "info", "warning", "error"] = "info"


class Settings(_Section):
    gateway: GatewaySettings = Field(default_factory=GatewaySettings)
    agent: AgentSettings = Field(default_factory=AgentSettings)
    providers: ProviderSettings = Field(default_factory=ProviderSettings)
    tools: ToolSettings = Field(default_factory=ToolSettings)
    channels: ChannelSettings = Field(default_factory=ChannelSettings)
    state: StateSettings = Field(default_factory=StateSettings)
    log: LogSettings = Field(default_factory=LogSettings)
