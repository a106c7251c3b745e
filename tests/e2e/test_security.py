"""Security defects that must stay fixed: exec escapes, an open gateway, unmasked tracebacks."""

from __future__ import annotations

import asyncio
import io
import json
import logging
import os
import stat
from pathlib import Path

import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed, InvalidStatus

from clawgate.agent.approvals import ApprovalBroker
from clawgate.agent.core.events import EventHub
from clawgate.agent.core.redact import RedactingFilter, register_secrets
from clawgate.agent.tools import ToolContext, ToolRegistry
from clawgate.agent.tools.shell import Exec
from clawgate.agent.toolset import default_tools
from clawgate.config.paths import Paths
from clawgate.config.schema import Settings
from clawgate.config.token import gateway_token
from clawgate.gateway.logs import LineFormatter
from tests.fakes.anthropic_api import text
from tests.harness import REAL_PYTHON_PATH, TOKEN, DaemonProcess
from clawgate.workspace.guard import WorkspaceGuard
from tests.untrusted_support import plain_exec

SECRET_CONFIG = 'token = "the-gateway-token-in-config"\n'


# exec ---------------------------------------------------------------------------------------
@pytest.fixture
def box(tmp_path: Path):
    """A home with config.toml beside the workspace (as in CLAWGATE_HOME); approvals denied."""
    (tmp_path / "config.toml").write_text(SECRET_CONFIG)
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "precious.txt").write_text("keep me")
    ws = WorkspaceGuard(tmp_path / "workspace")
    (ws.root / "notes.txt").write_text("needle in the notes\n")
    (ws.root / "sub").mkdir()
    (ws.root / "sub" / "inner.txt").write_text("inner\n")
    os.symlink(tmp_path, ws.root / "out")  # a symlink leading out of the workspace
    return tmp_path, ws


def registry_for(settings: Settings) -> ToolRegistry:
    events = EventHub()
    return ToolRegistry(default_tools(settings), events=events, approvals=ApprovalBroker(events, mode="deny"))


def context(ws: WorkspaceGuard) -> ToolContext:
    return ToolContext(session_key="s", channel="c", chat_id="c", sender_id="u", run_id="r", workspace=ws)


async def run_exec(ws: WorkspaceGuard, argv: list[str], cwd: str = ".", settings: Settings | None = None):
    registry = registry_for(settings or Settings())
    return await registry.execute({"id": "t1", "name": "exec", "input": {"argv": argv, "cwd": cwd}}, context(ws))


def reason(ws: WorkspaceGuard, argv: list[str], cwd: str = ".", settings: Settings | None = None) -> str | None:
    tool = Exec((settings or Settings()).tools.exec)
    return tool.needs_approval(Exec.Arguments(argv=argv, cwd=cwd), context(ws))


def test_default_allowlist_is_read_only_tools():
    allowlist = Settings().tools.exec.allowlist
    for risky in ("python3", "python", "git", "find", "sh", "bash", "env", "xargs", "rm", "perl", "node"):
        assert risky not in allowlist
    assert {"ls", "cat", "grep", "head", "wc"} <= set(allowlist)


async def test_interpreter_is_not_run_unasked(box):
    home, ws = box
    code = f"import shutil; shutil.rmtree({str(home / 'victim')!r})"
    out = await run_exec(ws, ["python3", "-c", code])
    assert out.status == "denied"
    assert "'python3' is not on the exec allowlist" in out.content
    assert (home / "victim" / "precious.txt").read_text() == "keep me"


async def test_find_delete_is_not_run_unasked(box):
    home, ws = box
    out = await run_exec(ws, ["find", ".", "-delete"])
    assert out.status == "denied" and "'find' is not on the exec allowlist" in out.content
    assert (ws.root / "notes.txt").exists()


@pytest.mark.parametrize("argv, cwd, why", [
    (["cat", "../config.toml"], ".", "'../config.toml' refers to {home}/config.toml, outside the workspace"),
    (["cat", "sub/../../config.toml"], ".", "outside the workspace"),
    (["cat", "../../config.toml"], "sub", "'../../config.toml' refers to {home}/config.toml, outside"),
    (["cat", "out/config.toml"], ".", "'out/config.toml' refers to {home}/config.toml, outside"),  # symlink
    (["head", "{home}/config.toml"], ".", "refers to {home}/config.toml, outside the workspace"),
    (["cat", "~/.bashrc"], ".", "home-directory path"),
    (["grep", "--file={home}/config.toml", "x"], ".", "(path '{home}/config.toml') refers to"),
    (["grep", "-f{home}/config.toml", "x"], ".", "(path '{home}/config.toml') refers to"),
    (["sort", "-no{home}/victim/precious.txt", "notes.txt"], ".", "(path '{home}/victim/precious.txt')"),
    (["sort", "--output", "{home}/victim/precious.txt", "notes.txt"], ".", "outside the workspace"),
])
async def test_allowlisted_program_with_a_path_outside_needs_approval(box, argv, cwd, why):
    home, ws = box
    argv = [a.format(home=home) for a in argv]
    out = await run_exec(ws, argv, cwd=cwd)
    assert out.status == "denied", out.content
    assert why.format(home=home) in out.content
    assert "the-gateway-token-in-config" not in out.content
    assert (home / "victim" / "precious.txt").read_text() == "keep me"


async def test_program_given_as_a_path_needs_approval(box):
    home, ws = box
    registry = registry_for(Settings())
    ctx = context(ws)
    fake = "#!/bin/sh\ntouch pwned\n"
    await registry.execute({"id": "w", "name": "write_file", "input": {"path": "cat", "content": fake}}, ctx)
    os.chmod(ws.root / "cat", 0o755)
    for argv0 in ("./cat", str(ws.root / "cat"), "sub/../cat"):
        out = await run_exec(ws, [argv0, "notes.txt"])
        assert out.status == "denied"
        assert f"argv[0] {argv0!r} is a path, not a program name" in out.content
    assert not (ws.root / "pwned").exists()


async def test_allowlisted_name_resolving_into_the_workspace_needs_approval(box, monkeypatch):
    home, ws = box
    (ws.root / "bin").mkdir()
    (ws.root / "bin" / "cat").write_text("#!/bin/sh\ntouch pwned\n")
    os.chmod(ws.root / "bin" / "cat", 0o755)
    monkeypatch.setenv("PATH", f"{ws.root / 'bin'}{os.pathsep}{os.environ['PATH']}")
    out = await run_exec(ws, ["cat", "notes.txt"])
    assert out.status == "denied"
    assert f"'cat' resolves to {ws.root / 'bin' / 'cat'}, a file inside the workspace" in out.content
    assert not (ws.root / "pwned").exists()


async def test_relative_path_entries_never_pick_a_workspace_file(box, monkeypatch):
    home, ws = box
    (ws.root / "cat").write_text("#!/bin/sh\ntouch pwned\n")
    os.chmod(ws.root / "cat", 0o755)
    monkeypatch.setenv("PATH", f".{os.pathsep}{os.pathsep}{os.environ['PATH']}")
    assert reason(ws, ["cat", "notes.txt"]) is None
    out = await run_exec(ws, ["cat", "notes.txt"])
    assert plain_exec(out.content) == "exit code 0\nneedle in the notes\n"  # the real cat ran
    assert not (ws.root / "pwned").exists()


async def test_option_that_runs_another_program_needs_approval(box):
    home, ws = box
    for option in ("--compress-program=sh", "--compress=sh", "--co=sh"):
        out = await run_exec(ws, ["sort", option, "-S", "1K", "notes.txt"])
        assert out.status == "denied"
        assert f"option {option!r} (--compress-program) makes sort run another program" in out.content


@pytest.mark.parametrize("argv, cwd, expected", [
    (["cat", "notes.txt"], ".", "needle in the notes"),
    (["cat", "../notes.txt"], "sub", "needle in the notes"),
    (["head", "-n1", "sub/../notes.txt"], ".", "needle in the notes"),
    (["grep", "-rn", "needle", "."], ".", "./notes.txt:1:needle"),
    (["grep", "--regexp=needle", "notes.txt"], ".", "needle"),
    (["wc", "-l", "--", "notes.txt"], ".", "1 notes.txt"),
    (["ls", "-la", "sub"], ".", "inner.txt"),
    (["echo", "a; rm -rf / && $(whoami)"], ".", "a; rm -rf / && $(whoami)"),
])
async def test_read_only_inspection_inside_the_workspace_runs_unasked(box, argv, cwd, expected):
    home, ws = box
    assert reason(ws, argv, cwd) is None
    out = await run_exec(ws, argv, cwd=cwd)
    assert not out.is_error and out.content.startswith("exit code 0") and expected in out.content, out.content


async def test_a_widened_allowlist_still_confines_path_arguments(box, monkeypatch):
    monkeypatch.setenv("PATH", REAL_PYTHON_PATH)
    home, ws = box
    settings = Settings.model_validate({"tools": {"exec": {"allowlist": ["python3"]}}})
    out = await run_exec(ws, ["python3", "-c", "print(6 * 7)"], settings=settings)
    assert plain_exec(out.content) == "exit code 0\n42\n"
    why = reason(ws, ["python3", str(home / "victim" / "precious.txt")], settings=settings)
    assert why and "outside the workspace" in why


# gateway token and origin ---------------------------------------------------------------------
def test_token_is_generated_once_user_only_and_config_wins(tmp_path: Path):
    paths = Paths(tmp_path)
    paths.ensure()
    unset = Settings()
    assert gateway_token(paths, unset) is None  # a client never creates it
    first = gateway_token(paths, unset, create=True)
    assert first and len(first) >= 32
    assert stat.S_IMODE(paths.gateway_token_file.stat().st_mode) == 0o600
    assert gateway_token(paths, unset, create=True) == first == gateway_token(paths, unset)
    configured = Settings.model_validate({"gateway": {"token": "from-config-123"}})
    assert gateway_token(paths, configured, create=True) == "from-config-123"
    paths.gateway_token_file.write_text("")  # torn or emptied: a new one is made, never an empty token
    assert gateway_token(paths, unset) is None
    assert gateway_token(paths, unset, create=True) not in (None, "", first)


@pytest.fixture
def tokenless(tmp_path: Path, fake_model):
    daemon = DaemonProcess(tmp_path / "home", anthropic_url=fake_model.base_url, token=None)
    daemon.init()
    assert "CLAWGATE_GATEWAY__TOKEN" not in daemon.env
    assert "token = " not in (daemon.home / "config.toml").read_text().split("[agent]")[0]
    daemon.start()
    yield daemon
    daemon.kill()


async def connect_with(daemon: DaemonProcess, token: str | None) -> None:
    params = {"auth": {"token": token}} if token is not None else {}
    async with connect(daemon.url) as ws:
        await ws.send(json.dumps({"type": "req", "id": "1", "method": "connect", "params": params}))
        await ws.recv()
        await ws.recv()  # closed here when the token is refused


async def test_daemon_without_configured_token_requires_its_persisted_token(tokenless, fake_model):
    daemon = tokenless
    token_file = daemon.home / "state" / "gateway.token"
    token = token_file.read_text().strip()
    assert len(token) >= 32 and token != TOKEN
    assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
    for wrong in ("nope", "", None, TOKEN):
        with pytest.raises(ConnectionClosed) as info:
            await asyncio.wait_for(connect_with(daemon, wrong), 10)
        assert info.value.rcvd.code == 1008 and "wrong gateway token" in info.value.rcvd.reason
    async with daemon.client() as client:  # with the persisted token
        assert (await client.request("status"))["version"]
    fake_model.enqueue(text("the answer is 42"))
    result = await asyncio.to_thread(daemon.cli, "chat", "-m", "question", "--session", "cli")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "the answer is 42"
    daemon.restart()
    assert token_file.read_text().strip() == token  # reused, so clients keep working
    async with daemon.client() as client:
        assert (await client.request("status"))["version"]
    assert token not in daemon.log_text()


async def test_browser_origins_are_refused_unless_allowed(daemon_factory):
    daemon = daemon_factory({"CLAWGATE_GATEWAY__ALLOWED_ORIGINS": '["http://localhost:3000"]'})
    for origin in ("http://evil.example", "null", "http://127.0.0.1:18789"):
        with pytest.raises(InvalidStatus) as info:
            async with connect(daemon.url, origin=origin):
                pass
        assert info.value.response.status_code == 403
    async with daemon.client() as client:  # no Origin header: a CLI or script
        assert (await client.request("status"))["version"]
    async with connect(daemon.url, origin="http://localhost:3000") as ws:
        await ws.send(json.dumps({"type": "req", "id": "1", "method": "connect",
                                  "params": {"auth": {"token": TOKEN}}}))
        assert json.loads(await ws.recv())["ok"] is True


async def test_default_refuses_every_origin(daemon):
    with pytest.raises(InvalidStatus) as info:
        async with connect(daemon.url, origin="http://evil.example"):
            pass
    assert info.value.response.status_code == 403
    async with daemon.client() as client:
        assert (await client.request("status"))["version"]


# log redaction ----------------------------------------------------------------------------
BOT_TOKEN = "123456789:AAHfakeTelegramBotToken_abcdefghijk"
REGISTERED = "registered-secret-value-9f8e7d"


def _log_exception(formatter: logging.Formatter) -> str:
    register_secrets([REGISTERED])
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(formatter)
    handler.addFilter(RedactingFilter())
    logger = logging.getLogger(f"test.redact.{id(formatter)}")
    logger.handlers[:] = [handler]
    logger.propagate = False
    try:
        raise RuntimeError(f"POST https://api.telegram.org/bot{BOT_TOKEN}/getUpdates failed; key {REGISTERED}")
    except RuntimeError:
        logger.exception("polling failed")
    return out.getvalue()


@pytest.mark.parametrize("formatter", [LineFormatter(), logging.Formatter("%(levelname)s %(message)s")],
                         ids=["LineFormatter", "standard"])
def test_tracebacks_are_redacted(formatter):
    line = _log_exception(formatter)
    assert "polling failed" in line and "RuntimeError" in line and "getUpdates failed" in line
    assert BOT_TOKEN not in line and BOT_TOKEN.split(":")[1] not in line
    assert REGISTERED not in line


@pytest.mark.parametrize("line, secret", [
    ("key sk-ant-api03-abcdefghijklmnop in a log", "abcdefghijklmnop"),
    ("GET https://api.telegram.org/bot123456789:AAHfiqksKZ8WmR2zSjiQ7_v4TMAKdiHm9T0/getUpdates", "AAHfiqksKZ8WmR2zSjiQ7"),
    ("Authorization: Bearer abcdefghijklmnopqrst", "abcdefghijklmnopqrst"),
    # a bot token after "Bearer": the bearer pattern must take the ":secret" tail too
    ("Authorization: Bearer bot123456789:AAHfiqksKZ8WmR2zSjiQ7_v4TMAKdiHm9T0", "AAHfiqksKZ8WmR2zSjiQ7"),
    ("bearer abc123456789:AAHfiqksKZ8WmR2zSjiQ7_v4TMAKdiHm9T0 sent", "AAHfiqksKZ8WmR2zSjiQ7"),
])
def test_token_shapes_are_masked_wherever_they_appear(line: str, secret: str) -> None:
    from clawgate.agent.core.redact import redact

    masked = redact(line)
    assert secret not in masked and "***" in masked


def test_redaction_leaves_ordinary_text_alone() -> None:
    from clawgate.agent.core.redact import redact

    text = "Bearer of good news: 12:30 meeting, ratio 3:4, see https://example.com/a:b"
    assert redact(text) == text
