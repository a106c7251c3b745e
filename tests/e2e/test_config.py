"""Settings: defaults, config.toml, environment overrides, one-line errors."""

from __future__ import annotations

import subprocess
import sys

import pytest

from clawgate.config.loader import ConfigError, env_overrides, load
from clawgate.config.paths import Paths
from tests.harness import ROOT, DaemonProcess, free_port


def test_defaults_without_any_file(tmp_path):
    paths, settings = load(tmp_path, environ={})
    assert settings.gateway.host == "127.0.0.1" and settings.gateway.port == 18789
    assert settings.channels.telegram.dm_policy == "pairing"


def test_env_overrides_nested_keys_and_json_lists(tmp_path):
    env = {"CLAWGATE_GATEWAY__PORT": "19000", "CLAWGATE_AGENT__MODEL": "claude-x",
           "CLAWGATE_CHANNELS__TELEGRAM__ALLOW_FROM": '["42", "alice"]', "CLAWGATE_HOME": "/ignored"}
    _, settings = load(tmp_path, environ=env)
    assert settings.gateway.port == 19000
    assert settings.agent.model == "claude-x"
    assert settings.channels.telegram.allow_from == ["42", "alice"]


def test_env_beats_file(tmp_path):
    (tmp_path / "config.toml").write_text('[gateway]\nport = 1234\ntoken = "abc"\n')
    _, settings = load(tmp_path, environ={"CLAWGATE_GATEWAY__PORT": "4321"})
    assert settings.gateway.port == 4321 and settings.gateway.token == "abc"


def test_secrets_from_vendor_variables(tmp_path):
    _, settings = load(tmp_path, environ={"ANTHROPIC_API_KEY": "sk-ant-xyz", "TELEGRAM_BOT_TOKEN": "1:abc"})
    assert settings.providers.anthropic.api_key == "sk-ant-xyz"
    assert settings.channels.telegram.token == "1:abc"


@pytest.mark.parametrize("env,expected", [
    ({"CLAWGATE_GATEWAY__PORT": "abc"}, "gateway.port = 'abc'"),
    ({"CLAWGATE_GATEWAY__PORT": "70000"}, "less than or equal to 65535"),
    ({"CLAWGATE_NOPE__X": "1"}, "unknown key 'nope'"),
    ({"CLAWGATE_CHANNELS__TELEGRAM__DM_POLICY": "everyone"}, "channels.telegram.dm_policy"),
    ({"CLAWGATE_CHANNELS__TELEGRAM__ALLOW_FROM": "[42"}, "not valid JSON"),
    ({"CLAWGATE_GATEWAY__HOST": "0.0.0.0"}, "not loopback"),
])
def test_bad_values_are_one_clear_line(tmp_path, env, expected):
    with pytest.raises(ConfigError) as info:
        load(tmp_path, environ=env)
    message = str(info.value)
    assert expected in message and "\n" not in message
    assert "fix" in message or "set" in message or "remove" in message


def test_bad_toml_is_one_line(tmp_path):
    (tmp_path / "config.toml").write_text("[gateway\nport=1")
    with pytest.raises(ConfigError) as info:
        load(tmp_path, environ={})
    assert "not valid TOML" in str(info.value)


def test_non_loopback_with_token_is_allowed(tmp_path):
    _, settings = load(tmp_path, environ={"CLAWGATE_GATEWAY__HOST": "0.0.0.0", "CLAWGATE_GATEWAY__TOKEN": "t0k3n-long"})
    assert settings.gateway.host == "0.0.0.0"


def test_env_overrides_ignore_home_and_nest():
    env = {"CLAWGATE_HOME": "/x", "CLAWGATE_CRASH_AT": "y", "CLAWGATE_MCP__SERVERS__FS__COMMAND": "fs-server",
           "CLAWGATE_GATEWAY": '{"port": 1}', "CLAWGATE_GATEWAY__HOST": "127.0.0.2", "OTHER__X": "1"}
    assert env_overrides(env) == {"mcp": {"servers": {"fs": {"command": "fs-server"}}},
                                  "gateway": {"port": 1, "host": "127.0.0.2"}}


def test_a_string_setting_takes_brackets_literally_and_a_list_setting_needs_json(tmp_path):
    """pydantic-settings parses JSON only where the setting is a list or table."""
    _, settings = load(tmp_path, environ={"CLAWGATE_AGENT__NAME": "[bot]"})
    assert settings.agent.name == "[bot]"
    with pytest.raises(ConfigError) as info:
        load(tmp_path, environ={"CLAWGATE_GATEWAY__ALLOWED_ORIGINS": "http://localhost:3000"})
    message = str(info.value)
    assert "CLAWGATE_GATEWAY__ALLOWED_ORIGINS='http://localhost:3000' is not valid JSON" in message
    assert "gateway.allowed_origins" in message and "\n" not in message


def test_cli_bad_config_prints_one_line_and_no_traceback(tmp_path):
    env = {"CLAWGATE_HOME": str(tmp_path), "CLAWGATE_GATEWAY__PORT": "not-a-port", "PATH": "/usr/bin:/bin"}
    result = subprocess.run([sys.executable, "-m", "clawgate.gateway.cli", "gateway"], env=env, cwd=ROOT,
                            capture_output=True, text=True, timeout=30)
    assert result.returncode == 2
    assert result.stderr.strip().startswith("clawgate: config error: gateway.port")
    assert len(result.stderr.strip().splitlines()) == 1


def test_init_never_overwrites_and_creates_user_only_files(tmp_path):
    env = {"CLAWGATE_HOME": str(tmp_path), "PATH": "/usr/bin:/bin"}
    run = lambda: subprocess.run([sys.executable, "-m", "clawgate.gateway.cli", "init", "--yes"], env=env, cwd=ROOT,
                                 capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)
    assert run().returncode == 0
    config = (tmp_path / "config.toml").read_text()
    assert 'token = "' in config and (tmp_path / "config.toml").stat().st_mode & 0o077 == 0
    soul = tmp_path / "workspace" / "SOUL.md"
    soul.write_text("my own soul")
    assert run().returncode == 0
    assert soul.read_text() == "my own soul"
    assert (tmp_path / "config.toml").read_text() == config
    assert Paths(tmp_path).state.stat().st_mode & 0o077 == 0


def _cli(tmp_path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full = {"CLAWGATE_HOME": str(tmp_path), "PATH": "/usr/bin:/bin", **(env or {})}
    return subprocess.run([sys.executable, "-m", "clawgate.gateway.cli", *args], env=full, cwd=ROOT, capture_output=True,
                          text=True, timeout=30, stdin=subprocess.DEVNULL)


def test_a_config_file_that_is_not_utf8_is_one_line_naming_the_file_and_the_fix(tmp_path):
    (tmp_path / "config.toml").write_bytes(b"[gateway]\nport = 18789\n# caf\xe9 in Latin-1\n")
    for args in (("status",), ("init", "--yes"), ("gateway",)):
        result = _cli(tmp_path, *args)
        assert result.returncode == 2, (args, result.stderr)
        assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1
        line = result.stderr.strip()
        assert str(tmp_path / "config.toml") in line and "not UTF-8" in line and "save it as UTF-8" in line
    assert (tmp_path / "config.toml").read_bytes().endswith(b"caf\xe9 in Latin-1\n")  # init kept it


SECRET = "sk-ant-api03-DO-NOT-PRINT-0123456789abcdef"


@pytest.mark.parametrize("name,value,names", [
    ("CLAWGATE_PROVIDERS__ANTHROPIC", SECRET, "providers.anthropic"),  # a string where a table belongs
    ("CLAWGATE_PROVIDERS__ANTHROPIC", f'{{"api_key": ["{SECRET}"]}}', "providers.anthropic.api_key"),
    ("CLAWGATE_PROVIDERS__OPENAI_COMPAT", f'{{"base_url": "x", "model": "m", "api_key": ["{SECRET}"]}}',
     "providers.openai_compat.api_key"),
    ("CLAWGATE_CHANNELS__TELEGRAM", f'{{"token": {{"t": "{SECRET}"}}}}', "channels.telegram.token"),
    ("CLAWGATE_GATEWAY", f'{{"token": ["{SECRET}"]}}', "gateway.token"),
    ("CLAWGATE_GATEWAY", f'{{"token": "{SECRET}"', "CLAWGATE_GATEWAY"),  # not even valid JSON
    ("CLAWGATE_MCP__SERVERS", f'{{"x": {{"command": "c", "env": {{"K": "{SECRET}"}}', "CLAWGATE_MCP__SERVERS"),
])
def test_config_errors_never_echo_a_secret(tmp_path, name, value, names):
    result = _cli(tmp_path, "status", env={name: value})
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and names in result.stderr
    assert "DO-NOT-PRINT" not in result.stderr + result.stdout
    assert "<secret, not shown>" in result.stderr


def test_a_command_line_flag_beats_the_environment_which_beats_the_file(tmp_path):
    """defaults < config.toml < CLAWGATE_* < flags, in the real daemon: it listens where --port says."""
    import socket

    file_port, env_port, flag_port = free_port(), free_port(), free_port()
    daemon = DaemonProcess(tmp_path, anthropic_url=None, env={"CLAWGATE_GATEWAY__PORT": str(env_port)})
    daemon.init()
    config = tmp_path / "config.toml"
    text = config.read_text()
    assert "\nport = 18789\n" in text
    config.write_text(text.replace("\nport = 18789\n", f"\nport = {file_port}\n", 1))
    assert load(tmp_path, environ={})[1].gateway.port == file_port
    assert load(tmp_path, environ={"CLAWGATE_GATEWAY__PORT": str(env_port)})[1].gateway.port == env_port
    daemon.start(args=("--port", str(flag_port)))
    try:
        with socket.create_connection(("127.0.0.1", flag_port), timeout=10):
            pass
        for port in (file_port, env_port):
            with pytest.raises(ConnectionRefusedError):
                socket.create_connection(("127.0.0.1", port), timeout=10).close()
    finally:
        daemon.kill()
