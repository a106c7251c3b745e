"""Attacks on `exec` that must stay closed: reading the host, escaping the workspace, outliving a call.

Everything runs through the real Exec tool with a real WorkspaceGuard, in a fake CLAWGATE_HOME
(state/ and config.toml holding secrets, the workspace beside them). "Approved" calls go to
Exec.run() directly, as the registry does after the user said yes: the sandbox must hold even
then. Each attack also runs once without the sandbox where that proves the attack is real.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path
from typing import Callable

import psutil
import pytest

from clawgate.agent.approvals import ApprovalBroker
from clawgate.agent.core.events import EventHub
from clawgate.agent.tools import ToolContext, ToolError, ToolRegistry
from clawgate.agent.tools.sandbox import SandboxPolicy, SandboxStatus, sandbox_status
from clawgate.agent.tools.sandbox_launch import landlock_abi
from clawgate.agent.tools.shell import Exec
from clawgate.config.paths import Paths
from clawgate.config.schema import ExecSettings
from tests.harness import REAL_PYTHON_PATH
from clawgate.workspace.guard import WorkspaceGuard
from tests.untrusted_support import plain_exec
from tests.waiting import DEFAULT_TIMEOUT, wait_until_async

CONFIG_SECRET = "config-secret-7f3a9c"
STATE_SECRET = "state-secret-2b8e41"
ENV_SECRET = "sk-ant-environ-secret-5d1c0e"
OUTSIDE_SECRET = "outside-secret-90ab12"



@pytest.fixture
def sandbox_required() -> None:
    """The real sandbox or one line naming what is missing: a test of the sandbox never passes by skipping."""
    status = sandbox_status()
    if not status.available:
        pytest.fail(f"exec's sandbox is unavailable here ({status.detail}): these tests need Landlock "
                    "(Linux 5.13 or later with landlock among the LSMs)", pytrace=False)


needs_sandbox = pytest.mark.usefixtures("sandbox_required")


class Box:
    """A fake CLAWGATE_HOME with secrets, its workspace, and Exec tools built for it."""

    def __init__(self, tmp_path: Path) -> None:
        self.tmp = tmp_path
        self.paths = Paths(tmp_path / "clawgate")
        self.paths.ensure()
        self.paths.config_file.write_text(f'[gateway]\ntoken = "{CONFIG_SECRET}"\n')
        (self.paths.state / "gateway.token").write_text(STATE_SECRET + "\n")
        (tmp_path / "outside.txt").write_text(OUTSIDE_SECRET + "\n")
        self.ws = WorkspaceGuard(self.paths.default_workspace)
        (self.ws.root / "notes.txt").write_text("needle in the notes\n")
        (self.ws.root / "sub").mkdir()
        (self.ws.root / "sub" / "inner.txt").write_text("inner\n")
        os.symlink(self.paths.home, self.ws.root / "home")  # symlinks leading out of the workspace
        os.symlink(self.paths.config_file, self.ws.root / "cfg")
        self.ctx = ToolContext(session_key="s", channel="c", chat_id="c", sender_id="u", run_id="r", workspace=self.ws)

    def tool(self, sandbox: str = "auto", status: Callable[[], SandboxStatus] = sandbox_status, **settings) -> Exec:
        return Exec(ExecSettings(sandbox=sandbox, **settings), sandbox=SandboxPolicy.for_paths(self.paths), status=status)

    async def run(self, argv: list[str], *, sandbox: str = "auto", timeout: float | None = None, tool: Exec | None = None) -> str:
        tool = tool or self.tool(sandbox)
        return await tool.run(Exec.Arguments(argv=argv, timeout=timeout), self.ctx)

    def reason(self, argv: list[str], **settings) -> str | None:
        return self.tool(**settings).needs_approval(Exec.Arguments(argv=argv), self.ctx)


@pytest.fixture
def box(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Box:
    monkeypatch.setenv("PATH", REAL_PYTHON_PATH)  # python3 = a real interpreter, not a version-manager shim
    monkeypatch.setenv("ANTHROPIC_API_KEY", ENV_SECRET)  # in os.environ: must not reach the child either
    return Box(tmp_path)


def secrets_in(text: str) -> list[str]:
    return [s for s in (CONFIG_SECRET, STATE_SECRET, ENV_SECRET, OUTSIDE_SECRET) if s in text]


# reading the host ------------------------------------------------------------------------
READERS = {
    "sh": lambda b: ["sh", "-c", f"cat {b.paths.config_file}; cat {b.paths.state}/gateway.token; cat cfg; "
                                 f"cat home/state/gateway.token; cat ../config.toml; cat {b.tmp}/outside.txt; "
                                 "ls home/state; env"],
    "python3": lambda b: ["python3", "-c", "import os, sys\n"
                          f"for p in [{str(b.paths.config_file)!r}, {str(b.paths.state / 'gateway.token')!r}, 'cfg', "
                          f"{str(b.tmp / 'outside.txt')!r}]:\n"
                          "    try: print(open(p).read())\n    except OSError as e: print(type(e).__name__, p)\n"
                          "print(dict(os.environ))"],
}


@needs_sandbox
@pytest.mark.parametrize("program", sorted(READERS))
async def test_approved_program_cannot_read_config_state_or_outside(box, program):
    argv = READERS[program](box)
    out = await box.run(argv)
    assert secrets_in(out) == [], out
    assert ("Permission denied" in out) if program == "sh" else ("PermissionError" in out), out
    assert "traces" not in out  # not even the names of the folders in state/
    unsandboxed = await box.run(argv, sandbox="off")
    assert CONFIG_SECRET in unsandboxed and STATE_SECRET in unsandboxed  # the attack is real without it
    assert ENV_SECRET not in unsandboxed  # secrets are never in the child's environment


@pytest.fixture
def daemon_stand_in(tmp_path: Path):
    """A process whose start-up environment holds a secret, as the daemon's does."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"], stdin=subprocess.DEVNULL,
                            env={**os.environ, "ANTHROPIC_API_KEY": ENV_SECRET})
    yield proc
    proc.kill()
    proc.wait()


@needs_sandbox
async def test_approved_program_cannot_read_the_daemons_environ(box, daemon_stand_in):
    argv = ["sh", "-c", f"cat /proc/{daemon_stand_in.pid}/environ; cat /proc/{os.getpid()}/environ; "
                        f"cat /proc/{os.getpid()}/cwd/README.md; echo done"]
    out = await box.run(argv)
    assert ENV_SECRET not in out and "done" in out
    assert out.count("Permission denied") == 3, out
    unsandboxed = await box.run(argv, sandbox="off")
    assert ENV_SECRET in unsandboxed  # same user, no sandbox: /proc/<pid>/environ is readable


@needs_sandbox
async def test_approved_program_cannot_write_outside_the_workspace(box):
    tmp_target = Path("/tmp") / f"clawgate-exec-escape-{os.getpid()}"
    targets = [tmp_target, box.tmp / "escape.txt", box.paths.state / "planted.txt", box.paths.home / "config.toml"]
    script = "; ".join(f"echo pwned > {t}" for t in targets)
    try:
        out = await box.run(["sh", "-c", script + f"; rm -f {box.tmp}/outside.txt; mkdir {box.tmp}/newdir; echo done"])
        assert out.count("Permission denied") >= len(targets) + 2, out
        assert "done" in out
        assert not tmp_target.exists() and not (box.tmp / "escape.txt").exists()
        assert not (box.paths.state / "planted.txt").exists() and not (box.tmp / "newdir").exists()
        assert CONFIG_SECRET in box.paths.config_file.read_text()
        assert (box.tmp / "outside.txt").exists()
    finally:
        tmp_target.unlink(missing_ok=True)


@needs_sandbox
async def test_approved_program_reads_writes_and_removes_inside_the_workspace(box):
    code = ("import os, tempfile, subprocess\n"
            "os.makedirs('made/deeper'); open('made/deeper/f.txt', 'w').write('written')\n"
            "print(open('made/deeper/f.txt').read(), open('notes.txt').read().strip())\n"
            "os.rename('made/deeper/f.txt', 'sub/moved.txt'); os.remove('sub/moved.txt'); os.removedirs('made/deeper')\n"
            "with tempfile.NamedTemporaryFile() as t: print('tmp in workspace', t.name.startswith(os.getcwd()))\n"
            "open('/dev/null', 'w').write('x'); print(len(open('/dev/urandom', 'rb').read(8)))\n"
            "print(subprocess.run(['ls', 'sub'], capture_output=True, text=True).stdout.strip())")
    out = await box.run(["python3", "-c", code])
    assert plain_exec(out) == "exit code 0\nwritten needle in the notes\ntmp in workspace True\n8\ninner.txt\n", out
    assert not (box.ws.root / "made").exists()


@needs_sandbox
async def test_sandboxed_program_has_no_capabilities_and_cannot_signal_the_daemon(box, daemon_stand_in):
    out = await box.run(["sh", "-c", "grep CapEff /proc/self/status"])
    assert "CapEff:\t0000000000000000" in out
    if landlock_abi() >= 6:
        out = await box.run(["sh", "-c", f"kill -0 {daemon_stand_in.pid} && echo alive"])
        assert "alive" not in plain_exec(out) and "not permitted" in out
        assert daemon_stand_in.poll() is None


# the argument checks, the second layer ---------------------------------------------------
async def test_files0_from_needs_approval_and_leaks_nothing_when_run(box):
    (box.ws.root / "list").write_bytes(f"{box.paths.config_file}\0{box.paths.state}/gateway.token\0".encode())
    for argv in (["sort", "--files0-from=list"], ["sort", "--files0-from", "list"], ["sort", "--files0=list"],
                 ["wc", "--files0-from=list"], ["du", "--files0-from=list"]):
        why = box.reason(argv)
        assert why and "--files0-from" in why and "reads the names of files" in why, argv
    if sandbox_status().available:
        out = await box.run(["sort", "--files0-from=list"])
        assert secrets_in(out) == [] and "Permission denied" in out, out


@pytest.mark.parametrize("argv, option", [
    (["file", "-f", "list"], "-f"), (["file", "-bf", "list"], "-f"), (["file", "--files-from=list"], "--files-from"),
    (["tar", "-cf", "a.tar", "-T", "list"], "-T"), (["tar", "cfT", "a.tar", "list"], "-T"),
    (["tar", "--files-from=list", "-cf", "a.tar"], "--files-from"),
])
def test_options_that_read_file_names_from_a_file_need_approval(box, argv, option):
    why = box.reason(argv, allowlist=[argv[0]])
    assert why and f"({option})" in why and "names of files" in why


@pytest.mark.parametrize("argv, option", [
    (["grep", "-R", "secret", "."], "-R"), (["grep", "-nR", "secret"], "-R"),
    (["grep", "--dereference-recursive", "x"], "--dereference-recursive"),
    (["ls", "-LR"], "-L"), (["ls", "-la", "--dereference", "home"], "--dereference"),
    (["du", "-L", "."], "-L"), (["du", "-shL"], "-L"), (["diff", "-r", "sub", "sub"], "-r"),
    (["diff", "--recursive", "sub", "sub"], "--recursive"),
])
def test_options_that_follow_symlinks_need_approval(box, argv, option):
    why = box.reason(argv)
    assert why and f"({option})" in why and "follows symlinks" in why


@needs_sandbox
@pytest.mark.parametrize("argv", [["grep", "-R", "secret", "."], ["ls", "-LR"], ["du", "-L", "-a", "."]])
async def test_symlink_following_run_anyway_shows_nothing_outside(box, argv):
    out = await box.run(argv)
    assert secrets_in(out) == [] and "traces" not in out, out
    unsandboxed = await box.run(argv, sandbox="off")
    assert "traces" in unsandboxed or CONFIG_SECRET in unsandboxed  # the links do lead out


@pytest.mark.parametrize("argv", [["date", "-s", "2000-01-01"], ["date", "--set=2000-01-01"], ["date", "-us", "x"],
                                  ["date", "--se", "x"]])
def test_setting_the_clock_needs_approval(box, argv):
    assert "sets the system clock" in (box.reason(argv) or "")


@pytest.mark.parametrize("argv", [
    ["date", "+%s"], ["date", "-Iseconds"], ["date", "-u", "-d", "@0"], ["grep", "-e", "-R", "notes.txt"],
    ["grep", "-eR", "notes.txt"], ["grep", "-rn", "needle", "."], ["ls", "-lR", "sub"], ["du", "-sh", "sub"],
    ["sort", "-t", "L", "notes.txt"], ["diff", "notes.txt", "sub/inner.txt"], ["wc", "-l", "notes.txt"],
])
async def test_harmless_uses_still_run_unasked(box, argv):
    assert box.reason(argv) is None
    out = await box.run(argv)
    assert not out.startswith("timed out") and secrets_in(out) == []


def test_diff_of_folders_needs_approval(box):
    assert "diff of folder 'sub'" in (box.reason(["diff", "sub", "sub"]) or "")


# time limits and leftovers ---------------------------------------------------------------
@pytest.mark.parametrize("sandbox", ["auto", "off"])
@pytest.mark.parametrize("timeout", [0.05, 0.5])
async def test_fast_writer_is_killed_within_its_timeout(box, sandbox, timeout):
    (box.ws.root / "big").write_bytes(os.urandom(1024 * 1024) * 16)
    # 320 GB of output: a writer left to finish (or drained before the kill) outlasts the deadline
    out = await asyncio.wait_for(box.run(["cat", *["big"] * 20_000], sandbox=sandbox, timeout=timeout),
                                 DEFAULT_TIMEOUT)
    assert out.startswith(f"timed out after {timeout:g}s and was killed")


def sleepers(marker: str) -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        if proc.info["cmdline"] == ["sleep", marker]:
            found.append(proc)
    return found


async def wait_until_gone(marker: str) -> None:
    await wait_until_async(lambda: not sleepers(marker), f"the background `sleep {marker}` to be killed")


@pytest.mark.parametrize("sandbox", ["auto", "off"])
async def test_background_children_die_with_the_call(box, sandbox):
    marker = f"47.{os.getpid()}"  # a duration no other process sleeps
    out = await box.run(["sh", "-c", f"sleep {marker} & echo started"], sandbox=sandbox, timeout=20)
    # the sleeper holds the output pipe open: waiting for it would end in the 20 s timeout, not exit code 0
    assert plain_exec(out) == "exit code 0\nstarted\n"
    await wait_until_gone(marker)
    marker = f"48.{os.getpid()}"
    out = await box.run(["sh", "-c", f"sleep {marker} & echo started; sleep 30"], sandbox=sandbox, timeout=0.5)
    assert out.startswith("timed out after 0.5s") and "started" in out
    await wait_until_gone(marker)


# without a sandbox -----------------------------------------------------------------------
def unavailable() -> SandboxStatus:
    return SandboxStatus(False, "none", "simulated: no Landlock")


async def test_without_a_sandbox_exec_runs_with_the_checks_alone(box):
    tool = box.tool(status=unavailable)
    out = await box.run(["cat", "notes.txt"], tool=tool)
    assert plain_exec(out) == "exit code 0\nneedle in the notes\n"
    assert not (box.ws.root / ".tmp").exists()  # no sandbox, no scratch folder
    out = await box.run(["sh", "-c", f"cat {box.paths.config_file}"], tool=tool)
    assert CONFIG_SECRET in out  # what the sandbox would have stopped: only approval guards this now
    assert "--files0-from" in (tool.needs_approval(Exec.Arguments(argv=["sort", "--files0-from=list"]), box.ctx) or "")


async def test_required_sandbox_refuses_in_one_line_when_unavailable(box):
    tool = box.tool("required", status=unavailable)
    events = EventHub()
    registry = ToolRegistry([tool], events=events, approvals=ApprovalBroker(events, mode="deny"))
    outcome = await registry.execute({"id": "t", "name": "exec", "input": {"argv": ["touch", "x"]}}, box.ctx)
    assert outcome.status == "error" and "\n" not in outcome.content, outcome.content  # refused, not sent for approval
    assert 'tools.exec.sandbox is "required"' in outcome.content and "simulated: no Landlock" in outcome.content
    assert 'set tools.exec.sandbox = "auto"' in outcome.content
    assert not (box.ws.root / "x").exists()
    with pytest.raises(ToolError):
        await box.run(["cat", "notes.txt"], tool=tool)


@needs_sandbox
async def test_required_sandbox_runs_when_available(box):
    out = await box.run(["sh", "-c", f"cat notes.txt; cat {box.paths.config_file}"], sandbox="required")
    assert "needle in the notes" in out and CONFIG_SECRET not in out


@needs_sandbox
async def test_launcher_failures_are_tool_errors(box):
    with pytest.raises(ToolError) as info:
        await box.run(["no-such-program-xyz"])
    assert "not found" in info.value.render() and "fix:" in info.value.render()


def test_status_is_one_line_and_says_what_it_is():
    status = sandbox_status()
    assert status is sandbox_status()  # probed once
    assert "\n" not in status.line() and status.line().startswith(f"exec sandbox: {status.kind}")
    if sys.platform.startswith("linux"):
        try:
            abi = landlock_abi()
        except OSError:
            abi = 0
        assert status.available == (abi > 0), status


# the policy ----------------------------------------------------------------------------------
def test_policy_never_grants_a_folder_holding_state_config_or_home(tmp_path):
    paths = Paths(tmp_path / "home" / ".clawgate")
    paths.ensure()
    paths.config_file.write_text("x")
    (paths.state / "bin").mkdir()
    (paths.home / "bin").mkdir()
    ws = paths.default_workspace
    ws.mkdir()
    policy = SandboxPolicy(secrets=(paths.state, paths.config_file), home=tmp_path / "home")
    search = os.pathsep.join(map(str, [tmp_path, tmp_path / "home", paths.home, paths.state / "bin", paths.home / "bin", "/usr/bin"]))
    granted = dict(policy.rules(ws, search))
    assert granted[str(ws)] == "rw" and granted[str(paths.home / "bin")] == "rx" and granted["/usr/bin"] == "rx"
    for refused in (tmp_path, tmp_path / "home", paths.home, paths.state / "bin"):
        assert str(refused) not in granted
    assert "/tmp" not in granted and "/dev" not in granted and granted["/dev/null"] == "dev"
    assert policy.exposed(ws) == [] and policy.exposed(paths.home) == [paths.state, paths.config_file]
