"""Load settings: embedded defaults < config.toml < CLAWGATE_* environment variables (< CLI flags,
which the commands apply to the loaded settings).

The environment layer is pydantic-settings' env source (prefix, `__` nesting, JSON for list and
table settings), imported only when a variable names more than a plain value; this module reads config.toml itself for its own one-line errors, merges the two,
and validates the result once.

Every failure becomes a `ConfigError` whose message is one line naming the key, the
value and what is expected, because a traceback is not an answer a user can act on.
"""

from __future__ import annotations

import functools
import json
import os
import tomllib
from pathlib import Path
from types import UnionType
from typing import Any, Literal, Mapping, Union, get_args, get_origin

from pydantic import BaseModel, ValidationError

from .agents import Agent, Roster, problem as agents_problem, resolve as resolve_agents
from .paths import Paths
from .schema import Settings

ENV_PREFIX = "CLAWGATE_"
# Variables that are not settings: the home folder, and the crash point of crash tests (agent/recovery/tool_calls.py).
_NOT_KEYS = {"CLAWGATE_HOME", "CLAWGATE_CRASH_AT"}


class ConfigError(Exception):
    """A user-fixable configuration problem, rendered as a single line."""


def _env_names(environ: Mapping[str, str]) -> dict[str, str]:
    """The CLAWGATE_* variables that name settings, checked for shape: an unknown section or an
    empty key part is an error here, because pydantic-settings would silently ignore it."""
    found: dict[str, str] = {}
    for name, raw in environ.items():
        if not name.startswith(ENV_PREFIX) or name in _NOT_KEYS:
            continue
        path = [part.lower() for part in name[len(ENV_PREFIX):].split("__")]
        if not all(path):
            raise ConfigError(f"config error: environment variable {name} has an empty key part; use CLAWGATE_SECTION__KEY")
        if path[0] not in Settings.model_fields:
            raise ConfigError(f"config error: unknown key {path[0]!r}; unset {name} or check its spelling")
        found[name] = raw
    return found


def env_overrides(environ: Mapping[str, str]) -> dict[str, Any]:
    """The settings given as `CLAWGATE_A__B=v` variables, as a nested dict, read by pydantic-settings
    against the schema (JSON for list and table settings, the text as it is for the others)."""
    named = _env_names(environ)
    if not named:
        return {}
    if (plain := _plain_overrides(named)) is not None:
        return plain
    # Deferred: pydantic-settings costs ~30 ms to import, and most runs set no CLAWGATE_* setting.
    from pydantic_settings import SettingsError

    try:
        return _channel_tables(named, _read_env(named))
    except SettingsError:
        for name, raw in named.items():  # which variable: each alone (only on this error path)
            try:
                _read_env({name: raw})
            except SettingsError as exc:
                raise ConfigError(_json_error(name, raw, exc.__cause__)) from None
        raise ConfigError("config error: the CLAWGATE_* variables are not valid together; check them") from None


def _channel_tables(named: Mapping[str, str], found: dict[str, Any]) -> dict[str, Any]:
    """The untyped `[channels.<name>]` sections given as JSON text (CLAWGATE_CHANNELS__SLACK='{...}', its
    `__ACCOUNTS` or `__ACCOUNTS__<account>`), decoded here: the schema does not know those sections, so
    pydantic-settings hands their text over as it is, and a table must be a table before anything reads
    it. Malformed JSON or another shape is a ConfigError naming the variable."""
    typed = set(Settings.model_fields["channels"].annotation.model_fields)  # type: ignore[union-attr]
    for name, raw in named.items():
        path = [part.lower() for part in name[len(ENV_PREFIX):].split("__")]
        is_table = len(path) == 2 or (len(path) in (3, 4) and path[2] == "accounts")
        if path[0] != "channels" or len(path) < 2 or path[1] in typed or not is_table:
            continue
        node: Any = found
        for part in path[:-1]:
            node = node.get(part) if isinstance(node, dict) else None
        if not isinstance(node, dict) or not isinstance(node.get(path[-1]), str):
            continue
        try:
            value = json.loads(raw)
        except json.JSONDecodeError as exc:
            # a channel's table holds its tokens, whatever their keys are named: never echoed
            raise ConfigError(_json_error(name, raw, exc, secret=True)) from None
        tables = value.values() if len(path) == 3 and isinstance(value, dict) else [value]
        if not all(isinstance(table, dict) for table in tables):
            what = "a table of accounts, each a table" if len(path) == 3 else "a table"
            raise ConfigError(f"config error: {name} must be {what} in JSON, e.g. "
                              f"{_TABLE_EXAMPLES[len(path)]}; fix the variable or unset it")
        node[path[-1]] = value
    return found


_TABLE_EXAMPLES = {2: """'{"token": "..."}'""", 3: """'{"work": {"token": "..."}}'""", 4: """'{"token": "..."}'"""}


def _plain_overrides(named: Mapping[str, str]) -> dict[str, Any] | None:
    """The environment layer without importing pydantic-settings (~25 ms of a start, more at load) when
    every variable names a plain value (text, number, flag, choice, path) through nested sections: for
    those its env source hands the text over as it is, to be validated with the file's values. None
    when one names a list, a table or anything else: pydantic-settings reads those (JSON)."""
    found: dict[str, Any] = {}
    for name, raw in named.items():
        path = [part.lower() for part in name[len(ENV_PREFIX):].split("__")]
        model: Any = Settings
        for part in path[:-1]:
            field = model.model_fields.get(part)
            if field is None or not (isinstance(field.annotation, type) and issubclass(field.annotation, BaseModel)):
                return None
            model = field.annotation
        field = model.model_fields.get(path[-1])
        if field is None or not _plain(field.annotation):
            return None
        node = found
        for part in path[:-1]:
            node = node.setdefault(part, {})
        node[path[-1]] = raw
    return found


_PLAIN = (str, int, float, bool, Path)


def _plain(annotation: Any) -> bool:
    """A type whose environment value is its text: a plain type, a choice of constants, or either or None."""
    if isinstance(annotation, type):
        return issubclass(annotation, _PLAIN)
    origin = get_origin(annotation)
    if origin is Literal:
        return all(isinstance(choice, _PLAIN) for choice in get_args(annotation))
    if origin in (Union, UnionType):
        return all(arg is type(None) or _plain(arg) for arg in get_args(annotation))
    return False


def _read_env(named: Mapping[str, str]) -> dict[str, Any]:
    from pydantic_settings import EnvSettingsSource

    source = EnvSettingsSource(_env_layer(), case_sensitive=False, env_prefix=ENV_PREFIX, env_nested_delimiter="__")
    source.env_vars = {name.lower(): raw for name, raw in named.items()}  # this mapping, not os.environ
    return source()


@functools.cache
def _env_layer() -> type[Any]:
    """The schema as pydantic-settings' model type, so its env source knows every field's type."""
    from pydantic_settings import BaseSettings

    return type("EnvLayer", (BaseSettings, Settings), {})


def _json_error(name: str, raw: str, cause: BaseException | None, *, secret: bool = False) -> str:
    path = [part.lower() for part in name[len(ENV_PREFIX):].split("__")]
    secret = secret or is_secret_path(path) or any(word in raw.lower() for word in _SECRET_WORDS)
    shown = "<secret, not shown>" if secret else repr(raw)
    why = f" ({cause.msg})" if isinstance(cause, json.JSONDecodeError) else ""
    return (f"config error: {name}={shown} is not valid JSON{why}, which {'.'.join(path)} (a list or table) needs; "
            "fix it: write lists as '[\"a\",\"b\"]' and tables as '{\"key\": \"value\"}'")


def _merge(base: dict[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in over.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out


_SECRET_WORDS = ("key", "token", "secret", "password")


def is_secret_path(path: list[str]) -> bool:
    """Whether a setting may hold a secret, so an error about it must not echo the value: anything
    under providers (a key pasted where a table belongs), an MCP server's table, env and headers,
    and any name with key/token/secret/password."""
    if path[:1] == ["mcp"] and (len(path) <= 3 or path[3] in ("env", "headers")):
        return True  # an MCP server's table holds its env and headers (tokens, Authorization)
    return bool(path) and (path[0] == "providers" or any(w in part.lower() for part in path for w in _SECRET_WORDS))


def _describe(error: ValidationError, data: Mapping[str, Any]) -> str:
    first = error.errors()[0]
    loc = [str(p) for p in first["loc"]]
    key = ".".join(loc)
    value: Any = data
    for part in loc:
        value = value.get(part) if isinstance(value, Mapping) else None
    env = ENV_PREFIX + "__".join(p.upper() for p in loc)
    if first["type"] == "extra_forbidden":
        return f"config error: unknown key {key!r}; remove it from config.toml (or unset {env}) or check its spelling"
    shown = "<secret, not shown>" if is_secret_path(loc) else repr(value)
    # a table's own check (e.g. an MCP server naming neither command nor url) says what is wrong in its message
    where = key if first["type"] == "value_error" and isinstance(value, Mapping) else f"{key} = {shown}"
    return f"config error: {where}: {first['msg'].lower()}; fix it in config.toml or {env}"


def load_settings(paths: Paths, environ: Mapping[str, str] | None = None) -> Settings:
    """Read config.toml (optional) and the environment; raise ConfigError on any problem."""
    environ = os.environ if environ is None else environ
    data: dict[str, Any] = {}
    if paths.config_file.exists():
        try:
            data = tomllib.loads(paths.config_file.read_text(encoding="utf-8"))
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"config error: {paths.config_file} is not valid TOML ({exc}); fix the line it names") from None
        except UnicodeDecodeError as exc:
            raise ConfigError(f"config error: {paths.config_file} is not UTF-8 text (byte 0x{exc.object[exc.start]:02x} "
                              f"at offset {exc.start}); save it as UTF-8, or move it aside and run `clawgate init` "
                              "for a fresh one") from None
        except OSError as exc:
            raise ConfigError(f"config error: cannot read {paths.config_file} ({exc.strerror}); check its permissions") from None
    settings = validate(_merge(data, env_overrides(environ)))
    _apply_secret_env(settings, environ)
    _check_bind(settings)
    return settings


def validate(data: dict[str, Any]) -> Settings:
    """Settings from a config table (file and environment merged), or ConfigError in one line;
    also what `clawgate agents` checks an edit with before writing it."""
    try:
        settings = Settings.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(_describe(exc, data)) from None
    if (wrong := agents_problem(settings.agents, settings.bindings, settings.mcp.servers)) is not None:
        raise ConfigError(f"config error: {wrong}")
    return settings


def _apply_secret_env(settings: Settings, environ: Mapping[str, str]) -> None:
    """Secrets conventionally live in their vendors' variables; honour them."""
    anthropic = settings.providers.anthropic
    anthropic.api_key = anthropic.api_key or environ.get("ANTHROPIC_API_KEY") or None
    anthropic.base_url = anthropic.base_url or environ.get("ANTHROPIC_BASE_URL") or None
    if (compat := settings.providers.openai_compat) is not None:
        compat.api_key = compat.api_key or environ.get("OPENAI_API_KEY") or None
    telegram = settings.channels.telegram
    telegram.token = telegram.token or environ.get("TELEGRAM_BOT_TOKEN") or None
    search = settings.tools.web_search
    search.brave_api_key = search.brave_api_key or environ.get("BRAVE_API_KEY") or None
    search.tavily_api_key = search.tavily_api_key or environ.get("TAVILY_API_KEY") or None
    if (problem := search.missing()) is not None:
        raise ConfigError(problem)


LOOPBACK = {"127.0.0.1", "localhost", "::1"}


def _check_bind(settings: Settings) -> None:
    host = settings.gateway.host
    if host not in LOOPBACK and not host.startswith("127.") and not settings.gateway.token:
        raise ConfigError(
            f"config error: gateway.host = {host!r} is not loopback and gateway.token is empty; "
            "set a token (clawgate init writes one) or bind 127.0.0.1"
        )


def agents_of(paths: Paths, settings: Settings) -> dict[str, Agent]:
    """The agents this home runs, the default first (config/agents.py): without [agents.*], the one
    agent `main` on agent.workspace, exactly as before."""
    folder = settings.agent.workspace
    single = Path(folder).expanduser() if folder else paths.default_workspace
    return resolve_agents(settings.agents, home=paths.home, default_workspace=single)


def roster_of(paths: Paths, settings: Settings) -> Roster:
    """The agents and bindings a daemon routes by (config/agents.py)."""
    return Roster(agents_of(paths, settings), tuple(settings.bindings), settings.heartbeat.deliver)


def load(home: Path | None = None, environ: Mapping[str, str] | None = None) -> tuple[Paths, Settings]:
    paths = Paths.from_env(environ) if home is None else Paths(home)
    return paths, load_settings(paths, environ)
