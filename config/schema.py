"""The settings schema: every key clawgate reads, its default and its bounds.

Defaults are embedded so `clawgate gateway` runs with no config file at all; the
config file and `CLAWGATE_*` environment variables only override them.
"""

# No `from __future__ import annotations` here: pydantic would compile every field's annotation text at each start.

import re
from typing import Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import BaseModel, ConfigDict, Field, model_validator
from pydantic import field_validator  # zone checks (cron, heartbeat)
from pydantic import ValidationInfo

from .access import AccessSettings, GroupPolicy
from .agents import AgentConfig, Binding
from .hooks import HookSettings, check_hook_names
from .mcp import McpSettings
from .web_tools import BrowserSettings, WebSearchSettings


class _Section(BaseModel):
    # Unknown keys are errors: a typo in config.toml must not be silently ignored.
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class GatewaySettings(_Section):
    host: str = "127.0.0.1"
    port: int = Field(18789, ge=0, le=65535)
    token: str | None = None  # None: the daemon generates one in $CLAWGATE_HOME/state/gateway.token
    # Browser pages (which send an Origin header) allowed to connect, e.g. "http://localhost:3000".
    # Empty: only non-browser clients (no Origin header) may open the WebSocket.
    allowed_origins: list[str] = Field(default_factory=list)
    max_frame_bytes: int = Field(1_048_576, ge=1024)
    send_queue: int = Field(1024, ge=8, description="frames buffered per client before it is dropped as too slow")
    max_unauthenticated: int = Field(256, ge=1, le=10_000, description=(
        "connections open at once that have not completed `connect`; more are closed at once, so a flood of "
        "idle sockets cannot exhaust the daemon's file descriptors"))
    event_loop: Literal["auto", "uvloop", "asyncio"] = Field("auto", description=(
        "the daemon's event loop: uvloop when installed (auto), or the standard asyncio loop"))
    tick_seconds: float = Field(30.0, ge=0.1, le=3600, description="how often every client gets a `tick` event")
    ping_seconds: float = Field(20.0, ge=0.1, le=3600, description=(
        "how often the gateway pings each client, and how long it waits for the pong before dropping it"))
    # Inbound webhooks ([hooks.<name>], docs/hooks.md) have their own HTTP listener, opened only when a hook is set.
    hooks_host: str = Field("127.0.0.1", description="address the webhook listener binds; a reverse proxy forwards to it")
    hooks_port: int = Field(18790, ge=0, le=65535, description="port of the webhook listener (POST /hooks/<name>)")


class AnthropicSettings(_Section):
    api_key: str | None = None  # normally from ANTHROPIC_API_KEY
    base_url: str | None = None  # normally from ANTHROPIC_BASE_URL
    timeout_seconds: float = Field(120.0, gt=0)
    max_retries: int = Field(4, ge=0, le=20)
    retry_base_seconds: float = Field(1.0, ge=0)
    fallback_models: list[str] = Field(default_factory=list)


class OpenAICompatSettings(_Section):
    """An OpenAI-compatible Chat Completions endpoint (Ollama, vLLM, …) tried after Anthropic fails."""

    base_url: str = Field(..., min_length=1, description="up to and including /v1, e.g. http://127.0.0.1:11434/v1")
    model: str = Field(..., min_length=1, description="the endpoint's model name, e.g. llama3.1")
    api_key: str | None = None  # normally from OPENAI_API_KEY; local servers usually need none
    timeout_seconds: float = Field(120.0, gt=0)
    max_retries: int = Field(2, ge=0, le=20)
    retry_base_seconds: float = Field(1.0, ge=0)


class BreakerSettings(_Section):
    """Per-provider circuit breaker (docs/providers.md): a provider failing again and again is skipped for a while."""

    enabled: bool = True
    failure_threshold: int = Field(3, ge=1, le=100, description="calls in a row that failed after all retries before a provider is paused")
    cooldown_seconds: float = Field(60.0, gt=0, le=86_400, description="how long a paused provider is skipped before one trial call")


class ProviderSettings(_Section):
    anthropic: AnthropicSettings = Field(default_factory=AnthropicSettings)
    # Set it to fall back to (or, without an Anthropic key, use only) an OpenAI-compatible endpoint.
    openai_compat: OpenAICompatSettings | None = None
    breaker: BreakerSettings = Field(default_factory=BreakerSettings)


class AgentSettings(_Section):
    name: str = "Claw"
    model: str = "claude-sonnet-4-5"
    max_tokens: int = Field(4096, ge=1)
    max_iterations: int = Field(40, ge=1, description="model calls per message before the run stops honestly")
    max_concurrent: int = Field(8, ge=1, description="sessions served at the same time")
    context_tokens: int = Field(200_000, ge=1000)
    restate_after_turns: int = Field(20, ge=1)
    consolidate_at: float = Field(0.5, gt=0, lt=1, description="share of context_tokens at which old history is consolidated")
    compact_keep_messages: int = Field(12, ge=2, description="newest messages whose tool results are always shown in full")
    compact_chunk_ratio: float = Field(0.05, gt=0, le=1, description="share of context_tokens of old tool output that triggers compaction")
    max_message_attempts: int = Field(3, ge=1, description="restarts a message may cause before it is set aside")
    max_task_resumes: int = Field(3, ge=1, description="restarts a task may go through without progress before it fails")
    task_reminder_turns: int = Field(8, ge=1, description="turns without a plan update before the agent is reminded")
    workspace: str | None = None  # default: $CLAWGATE_HOME/workspace
    stream: bool = True


class ExecSettings(_Section):
    timeout_seconds: float = Field(30.0, gt=0)
    output_cap_bytes: int = Field(16_000, ge=256)
    # Program names (argv[0], found on PATH) that run without asking the user, as long as every
    # path argument stays inside the workspace; anything else needs approval. The default is
    # read-only inspection tools only: no interpreters (python3 -c …), nothing that runs other
    # programs or deletes (find -exec/-delete), no git (a repo's config can run commands).
    allowlist: list[str] = Field(
        default_factory=lambda: [
            "ls", "cat", "head", "tail", "wc", "grep", "pwd", "date", "echo",
            "diff", "sort", "uniq", "stat", "du", "true", "file", "which",
        ]
    )
    # Every exec call runs in a Landlock sandbox (Linux): system folders read-only, the workspace
    # writable, nothing else. "auto": sandbox when the kernel can; "required": refuse exec when it
    # cannot; "off": argument checks only.
    sandbox: Literal["auto", "required", "off"] = "auto"
    sandbox_read_paths: list[str] = Field(
        default_factory=list,
        description="more folders sandboxed programs may read and run from (e.g. ~/.pyenv); never state/ or config.toml",
    )
    # Background exec (docs/background.md): a call still running after this many seconds moves to the
    # background so the chat stays free (0: never automatically); `background: true` goes there at once.
    background_after_seconds: float = Field(10.0, ge=0)
    # exec's programs get only allowlisted environment variables (locale, TERM, TZ, USER …; see
    # agent/tools/shell.py ENV_ALLOWED); names listed here are passed as well. Never list a secret.
    env_allowlist: list[str] = Field(default_factory=list,
                                     description="more environment variable names passed to exec's programs")
    background_timeout_seconds: float = Field(1800.0, gt=0, le=86_400,
                                              description="limit of a background call that names no timeout")


class BackgroundSettings(_Section):
    """Caps on slow work running off the session's lane (docs/background.md)."""

    max_jobs: int = Field(8, ge=1, description="background jobs running at once, all sessions together")
    max_per_session: int = Field(3, ge=1, description="background jobs running at once in one session")


class ToolSettings(_Section):
    exec: ExecSettings = Field(default_factory=ExecSettings)
    read_cap_bytes: int = Field(64_000, ge=256)
    web_fetch_cap_bytes: int = Field(100_000, ge=256)
    web_search: WebSearchSettings = Field(default_factory=WebSearchSettings)  # config/web_tools.py, docs/browser.md
    browser: BrowserSettings = Field(default_factory=BrowserSettings)
    approval_timeout_seconds: float = Field(300.0, gt=0)
    # "ask": risky calls wait for the user; "deny": refuse them; "allow": run them (trusted setups only).
    approval_mode: Literal["ask", "deny", "allow"] = "ask"


class TranscriptionSettings(_Section):
    """An OpenAI-compatible speech-to-text endpoint (POST {base_url}/audio/transcriptions) for voice notes."""

    base_url: str = Field(..., pattern=r"^https?://", description="up to and including /v1, e.g. https://api.openai.com/v1")
    model: str = Field("whisper-1", min_length=1)
    api_key: str | None = None
    timeout_seconds: float = Field(60.0, gt=0)


CLOUD_FILE_BYTES = 20 * 1024 * 1024   # Telegram's cloud Bot API serves bots files up to 20 MB
LOCAL_FILE_BYTES = 2000 * 1024 * 1024  # a self-hosted Bot API server: Telegram's 2000 MB file limit


def _bot_api_url(value: str | None) -> str | None:
    """A Bot API server's address with or without the trailing /bot (or slash); kept ending in /bot,
    which is what the Telegram library appends the token to (files are served at .../file/bot)."""
    if value is None or not value.strip():
        return None
    url = value.strip().rstrip("/")
    if not re.match(r"^https?://[^/\s]+", url):
        raise ValueError(f"base_url {value!r} is not an http(s) URL; give the Bot API server's address, "
                         "e.g. http://127.0.0.1:8081/bot")
    return url if url.endswith("/bot") else url + "/bot"


class TelegramSettings(AccessSettings):
    """[channels.telegram]: the kit's keys (config/access.py) plus the Bot API's."""

    enabled: bool | None = None  # None: on when a token is present
    token: str | None = None  # normally from TELEGRAM_BOT_TOKEN
    base_url: str | None = Field(None, description=(
        "a self-hosted Bot API server, with or without the trailing /bot, e.g. http://127.0.0.1:8081"))
    poll_timeout_seconds: int = Field(30, ge=0, le=50)
    # Telegram's default since its first version, kept so existing configs mean what they meant:
    # groups read only messages addressing the bot, from owners, allow_from and paired users.
    group_policy: GroupPolicy = "allowlist"
    stall_seconds: float = Field(90.0, gt=0, description="restart polling when no getUpdates call finished for this long")
    request_timeout_seconds: float = Field(20.0, gt=0)
    ack_reaction: str = Field("👀", max_length=8, description="reaction put on a message once it is accepted; empty: none")
    max_file_bytes: int = Field(CLOUD_FILE_BYTES, ge=1, le=LOCAL_FILE_BYTES, description=(
        "largest document accepted: up to 20 MiB with Telegram's own Bot API (all it serves to bots), "
        "up to 2000 MiB with a self-hosted Bot API server in base_url"))
    # Webhook mode (instead of long polling): Telegram POSTs updates to webhook_url, which a reverse
    # proxy forwards to webhook_listen:webhook_port. Empty: long polling.
    webhook_url: str | None = Field(None, pattern=r"^https?://", description="public URL Telegram posts updates to")
    webhook_listen: str = "127.0.0.1"
    webhook_port: int = Field(8443, ge=0, le=65535)
    webhook_secret: str | None = Field(None, min_length=1, max_length=256, pattern=r"^[A-Za-z0-9_-]+$",
                                       description="checked on every webhook request; default: derived from the token")
    # Voice notes are refused unless this is set; then they are transcribed and read as text.
    transcription: TranscriptionSettings | None = None

    _base_url = field_validator("base_url")(_bot_api_url)

    @field_validator("max_file_bytes")
    @classmethod
    def _file_limit(cls, value: int, info: ValidationInfo) -> int:
        """A limit the server cannot serve is refused here, never cut silently: what is set is honoured."""
        base_url = info.data.get("base_url")
        if (base_url is None or "://api.telegram.org/" in base_url) and value > CLOUD_FILE_BYTES:
            raise ValueError(f"above the 20 MiB ({CLOUD_FILE_BYTES}) that Telegram's Bot API serves to bots; "
                             "lower it, or point base_url at a self-hosted Bot API server (up to 2000 MiB)")
        return value


class ChannelSettings(_Section):
    """[channels]: the built-in Telegram section is typed here; every other `[channels.<name>]` section is
    kept as a table and validated by its adapter's settings model when the daemon builds the channels
    (channels/kit/registry.py), since only the installed adapters know their keys."""

    model_config = ConfigDict(extra="allow", validate_assignment=True)

    telegram: TelegramSettings = Field(default_factory=TelegramSettings)
    owner_shared_session: bool = Field(False, description=(
        "the owner's private chats on every channel share one session (default: one session per channel and chat)"))
    delivery_retry_seconds: float = Field(1.0, gt=0, le=300, description=(
        "a reply the channel could not deliver now is tried again after this, doubling up to 5 minutes"))

    @model_validator(mode="after")
    def _tables_only(self) -> "ChannelSettings":
        """A `[channels.<name>]` that is not a table (`slack = 5`) is refused here: everything reading the
        sections takes them as tables."""
        for name, value in (self.model_extra or {}).items():
            if not isinstance(value, dict):
                raise ValueError(f"channels.{name} must be a table ([channels.{name}] with its keys), "
                                 f"not {type(value).__name__}")
        return self

    def sections(self) -> dict[str, dict[str, object]]:
        """The `[channels.<name>]` tables other than telegram, as written."""
        return {name: dict(value) for name, value in (self.model_extra or {}).items()}


class StateSettings(_Section):
    fsync: bool = Field(True, description="fsync durable writes; off trades power-loss safety for speed")
    keep_days: float = Field(30.0, gt=0, description="how long answered/delivered queue rows are kept (duplicate detection)")
    usage_flush_seconds: float = Field(5.0, gt=0, le=3600, description="token usage is saved this long after a model call, in batches (a crash loses at most this window)")
    sessions_in_memory: int = Field(256, ge=1, description="recently used sessions kept in memory; others are read again from their log on their next message")
    records_in_memory: int = Field(12_000, ge=0, description="session records kept in memory in all (beyond it the least recently used sessions are dropped; a session in use always stays)")


class CheckpointSettings(_Section):
    enabled: bool = True
    every_turns: int = Field(1, ge=0, description="also take a checkpoint after every Nth model turn that ran tools (0: never); drift control goes back to the last one before a drift began")
    every_events: int = Field(50, ge=1, description="also take a checkpoint after this many session records (at a clean point)")
    keep_count: int = Field(500, ge=1, description="checkpoints kept per session (older ones pruned unless a live branch needs them)")
    keep_days: float = Field(30.0, gt=0, description="checkpoints older than this are pruned unless a live branch needs them")


class LogSettings(_Section):
    level: Literal["debug", "info", "warning", "error"] = "info"
    # Also write the log to $CLAWGATE_HOME/logs/clawgate.log (rotated), for `clawgate logs`.
    file: bool = Field(False, description="write a rotating log file under $CLAWGATE_HOME/logs")
    file_max_bytes: int = Field(5 * 1024 * 1024, ge=10_000, description="size at which the log file is rotated")
    file_backups: int = Field(3, ge=0, le=100, description="rotated log files kept (clawgate.log.1 …)")


def _check_zone(value: str | None) -> str | None:
    """An IANA zone name or None (the host's zone); checked here so a typo fails at start-up."""
    if value:
        try:
            ZoneInfo(value)
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError(f"unknown time zone {value!r}; use an IANA name like Europe/Berlin") from None
    return value


class CronSettings(_Section):
    enabled: bool = True
    grace_seconds: float = Field(3600.0, ge=0, description="a run missed while the daemon was down still runs at start-up if at most this late")
    max_failures: int = Field(5, ge=1, description="failed runs in a row before a job is disabled (its target is told)")
    backoff_seconds: float = Field(30.0, ge=0, description="first retry delay after a failed run; doubles per failure")
    backoff_max_seconds: float = Field(3600.0, ge=0)
    history: int = Field(50, ge=1, le=10_000, description="runs kept per job")
    timezone: str | None = Field(None, description="zone for cron expressions without --tz; default: the host's")

    _zone = field_validator("timezone")(_check_zone)


class HeartbeatSettings(_Section):
    enabled: bool = True
    interval_seconds: float = Field(300.0, gt=0)
    active_hours: str | None = Field(None, pattern=r"^([01]\d|2[0-3]):[0-5]\d-(([01]\d|2[0-3]):[0-5]\d|24:00)$",
                                     description="e.g. 08:00-22:00 (may wrap midnight); empty: always")
    timezone: str | None = Field(None, description="zone of active_hours; default: the host's")
    model: str | None = Field(None, description="model for heartbeat turns (a cheaper one); default: agent.model")
    session: str = Field("heartbeat", min_length=1, max_length=200, description="session that works through HEARTBEAT.md")
    # <channel>:<chat id> for any installed chat channel (checked against the installed channels at start)
    # (no bounded repeat of \w in the pattern: pydantic's Rust regex expands `[\w]{1,200}` into a 20 MB automaton)
    deliver: str = Field("last", max_length=232, pattern=r"^(last|none|gateway(:[\w.:@/-]+)?|[a-z][a-z0-9_]*(\.[a-z][a-z0-9_-]*)?:[\w.:@!+=/-]+)$",
                         description="where HEARTBEAT.md turns report: last (the session's last chat), none, or a "
                                     "target such as telegram:<chat id>, telegram.work:<chat id> (an account), slack:<channel id>, "
                                     "gateway[:<session>]")
    max_beats_without_progress: int = Field(3, ge=0, description="beats on a task that does not move before it is left alone (0: no limit)")

    _zone = field_validator("timezone")(_check_zone)


class DriftSettings(_Section):
    """Drift signals and the correction ladder (docs/drift.md). Counts run from the start of the
    session's current task (else of the run) and, for the soft signals, from the last correction."""

    enabled: bool = True
    window: int = Field(6, ge=2, description="recent tool calls the loop and relevance signals look at")
    repeat_threshold: int = Field(3, ge=2, description="the same call (name + key arguments) this often in the window is a loop")
    failing_retry_threshold: int = Field(2, ge=1, description="retries of a call that keeps failing before it is a signal")
    no_progress_turns: int = Field(8, ge=1, description="turns without a task-plan update (start/complete/note) before it is a signal")
    relevance_threshold: float = Field(0.2, ge=0, le=1, description="share of recent actions that touch the goal's words below which the run looks off-goal (0: off)")
    reflect_every: int = Field(10, ge=0, description="forced reflection every N turns of a task or run (0: only on signals)")
    scope_ratio: float = Field(0.75, gt=0, le=1, description="share of a hard limit at which scope creep is signalled")
    max_tool_calls: int = Field(60, ge=1, description="hard limit: tool calls per task (or per run without a task)")
    max_wall_seconds: float = Field(3600.0, gt=0, description="hard limit: wall time of one run (a task resumed later starts afresh)")
    max_history_tokens: int = Field(150_000, ge=1000, description="hard limit: estimated tokens in the model's view")
    max_resets: int = Field(1, ge=0, description="context resets before a persisting signal stops the run")
    model: str | None = Field(None, description="model for reflection turns; default: agent.model")
    # Relevance by embeddings instead of shared words: an OpenAI-compatible endpoint (Ollama, vLLM, …).
    embedding_url: str | None = Field(None, description="base URL up to and including /v1 of an /embeddings endpoint; empty: the lexical score")
    embedding_model: str = Field("nomic-embed-text", min_length=1)
    embedding_min_similarity: float = Field(0.5, ge=-1, le=1, description="cosine similarity from which a call counts as about the goal")


class ReflectionSettings(_Section):
    """The completeness check before a task or multi-step request is reported done."""

    enabled: bool = True
    max_supplements: int = Field(3, ge=0, le=10, description="supplementary steps planned per check")
    max_rounds: int = Field(2, ge=1, le=5, description="check -> supplements -> check again, at most this often")
    min_tool_calls: int = Field(3, ge=1, description="a run that finished no task and changed nothing is checked when it made at least this many tool calls")
    model: str | None = Field(None, description="model for the check; default: agent.model")


class SubagentSettings(_Section):
    """The `spawn` tool: sub-agents with their own transcript, a smaller prompt and a budget (docs/subagents.md)."""

    enabled: bool = True
    max_depth: int = Field(1, ge=1, le=3, description="nesting: 1 = the main agent may spawn, a sub-agent may not")
    max_concurrent: int = Field(4, ge=1, le=32, description="sub-agents running at once, per nesting level")
    max_turns: int = Field(15, ge=1, le=200, description="model calls per sub-agent; a spawn call may ask for fewer")
    max_tokens: int = Field(300_000, ge=1000, description="tokens (input, cached and output) per sub-agent; a spawn call may ask for fewer")
    summary_chars: int = Field(4000, ge=200, le=64_000, description="longest result a sub-agent hands back; its transcript keeps the rest")


class FleetSettings(_Section):
    """Several processes on one Redis share the work (docs/fleet.md); unset: one process, SQLite, as always."""

    redis_url: str | None = Field(None, description=(
        "redis://[:password@]host:port/db of the fleet's Redis (AOF on); set: this process joins the fleet"))
    node: str | None = Field(None, max_length=100, pattern=r"^[A-Za-z0-9_.:-]+$",
                             description="this process's name in the fleet; default: host name and pid")
    partitions: int = Field(64, ge=1, le=4096, description=(
        "partition streams sessions are spread over; read only when the fleet is created (kept in Redis)"))
    lease_seconds: float = Field(15.0, ge=0.5, le=600, description=(
        "how long a worker's hold on a partition or singleton lasts without renewal (renewed every third of it); "
        "a dead worker's work moves on after this"))
    prefix: str = Field("clawgate", min_length=1, max_length=50, pattern=r"^[A-Za-z0-9_.:-]+$",
                        description="key prefix: fleets sharing one Redis need different prefixes")


class Settings(_Section):
    gateway: GatewaySettings = Field(default_factory=GatewaySettings)
    agent: AgentSettings = Field(default_factory=AgentSettings)
    providers: ProviderSettings = Field(default_factory=ProviderSettings)
    tools: ToolSettings = Field(default_factory=ToolSettings)
    channels: ChannelSettings = Field(default_factory=ChannelSettings)
    state: StateSettings = Field(default_factory=StateSettings)
    checkpoints: CheckpointSettings = Field(default_factory=CheckpointSettings)
    log: LogSettings = Field(default_factory=LogSettings)
    cron: CronSettings = Field(default_factory=CronSettings)
    heartbeat: HeartbeatSettings = Field(default_factory=HeartbeatSettings)
    drift: DriftSettings = Field(default_factory=DriftSettings)
    reflection: ReflectionSettings = Field(default_factory=ReflectionSettings)
    subagents: SubagentSettings = Field(default_factory=SubagentSettings)
    background: BackgroundSettings = Field(default_factory=BackgroundSettings)
    fleet: FleetSettings = Field(default_factory=FleetSettings)
    mcp: McpSettings = Field(default_factory=McpSettings)  # MCP tool servers (config/mcp.py, docs/mcp.md)
    # several agents and the bindings routing chats to them (config/agents.py, docs/agents.md); none: one agent
    agents: dict[str, AgentConfig] = Field(default_factory=dict)
    bindings: list[Binding] = Field(default_factory=list)
    hooks: dict[str, HookSettings] = Field(default_factory=dict)  # inbound webhooks (config/hooks.py, docs/hooks.md)

    _hook_names = field_validator("hooks")(check_hook_names)
