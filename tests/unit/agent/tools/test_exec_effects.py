"""exec decided on its effect: the agent's own files stay read-only, the environment is an allowlist,
and the network is cut, whatever program runs and however it writes.

Every call goes through the real Exec tool, the real bubblewrap and Landlock layers, in a fake
CLAWGATE_HOME (tests/unit/agent/tools/test_attacks_exec.py `Box`). Calls go to Exec.run() as the registry runs them
after the owner said yes to running the program (ctx.approved): approving a program is not
approving what the mounts keep read-only.
"""

from __future__ import annotations

import json
import os
import socket
from dataclasses import replace
from pathlib import Path
from typing import Iterator

import pytest

from clawgate.agent.approvals import ApprovalBroker
from clawgate.agent.core.events import EventHub
from clawgate.agent.trust.taint import Taint
from clawgate.agent.tools import ToolContext, ToolError, ToolRegistry
from clawgate.agent.tools.mounts import MountStatus, mount_status
from clawgate.agent.tools.sandbox import SandboxPolicy
from clawgate.agent.tools.shell import Exec, child_env
from clawgate.config.schema import ExecSettings
from tests.unit.agent.tools.test_attacks_exec import Box, box  # noqa: F401  (box is a fixture)
from tests.fakes.loopback import tcp_listener
from tests.untrusted_support import plain_exec

SOUL = "# SOUL\nBe kind.\n"
SKILL = "---\nname: demo\ndescription: a demo skill\n---\nDo the demo.\n"


@pytest.fixture
def ws(box: Box) -> Box:  # noqa: F811
    """The Box with prompt files and a skill, as `clawgate init` and the owner left them."""
    (box.ws.root / "SOUL.md").write_text(SOUL)
    (box.ws.root / "skills" / "demo").mkdir(parents=True)
    (box.ws.root / "skills" / "demo" / "SKILL.md").write_text(SKILL)
    return box


def owner(box: Box, **changes) -> ToolContext:
    """The owner's run, the program approved (what the mounts grant is decided apart from that)."""
    return replace(box.ctx, **{"owner": True, "approved": True, **changes})


async def run(box: Box, argv: list[str], ctx: ToolContext, **args) -> str:
    return await box.tool().run(Exec.Arguments(argv=argv, **args), ctx)


def test_the_mount_layer_is_there() -> None:
    status = mount_status()
    assert status.available, status.detail  # `make test` installs bubblewrap, as `make browser` installs chromium
    assert "\n" not in status.line() and status.line().startswith("exec mounts: bubblewrap")


WRITERS = {
    "sort -o": lambda t: ["sort", "-o", t, "notes.txt"],
    "cp": lambda t: ["cp", "notes.txt", t],
    "tee": lambda t: ["tee", t],  # stdin is empty: tee would truncate the file to nothing
    "sed -i": lambda t: ["sed", "-i", "s/.*/evil/", t],
    "python3 open().write": lambda t: ["python3", "-c", f"open({t!r}, 'w').write('evil')"],
    "mv over it": lambda t: ["mv", "notes.txt", t],
    "rm": lambda t: ["rm", "-r", t],
    "ln -sf": lambda t: ["ln", "-sf", "notes.txt", t],
}
TARGETS = ["SOUL.md", "USER.md", "skills/demo/SKILL.md", "skills", ".tmp/home/.bashrc", ".tmp/home"]


@pytest.mark.parametrize("writer", sorted(WRITERS))
@pytest.mark.parametrize("target", TARGETS)
async def test_writing_programs_cannot_change_the_agents_own_files(ws: Box, writer: str, target: str) -> None:
    root = ws.ws.root
    out = await run(ws, WRITERS[writer](target), owner(ws))
    assert "exit code 0" not in out, out  # the program itself was told no
    assert (root / "SOUL.md").read_text() == SOUL
    assert (root / "skills/demo/SKILL.md").read_text() == SKILL
    assert (root / "USER.md").read_text() == ""  # created empty so a mount can keep it empty
    assert not (root / ".tmp/home/.bashrc").exists() and (root / ".tmp/home").is_dir()
    assert (root / "notes.txt").read_text() == "needle in the notes\n"


async def test_ordinary_files_beside_them_are_written_as_before(ws: Box) -> None:
    root = ws.ws.root
    out = await run(ws, ["sort", "-o", "sorted.txt", "notes.txt"], owner(ws))
    assert plain_exec(out).startswith("exit code 0"), out
    out = await run(ws, ["sed", "-i", "s/needle/pin/", "notes.txt"], owner(ws))
    assert plain_exec(out).startswith("exit code 0"), out
    assert (root / "sorted.txt").read_text() == "needle in the notes\n"
    assert (root / "notes.txt").read_text() == "pin in the notes\n"
    out = await run(ws, ["sh", "-c", 'mkdir -p "$XDG_CACHE_HOME" && echo cached > "$XDG_CACHE_HOME/x" && '
                                     'cat "$XDG_CACHE_HOME/x"'], owner(ws))
    assert plain_exec(out) == "exit code 0\ncached\n", out  # caches go to TMPDIR: HOME is read-only


async def test_the_folders_above_a_protected_one_cannot_be_swapped(ws: Box) -> None:
    root = ws.ws.root
    out = await run(ws, ["sh", "-c", "mv .tmp .tmp-old; mkdir -p .tmp/home; echo evil > .tmp/home/.bashrc; "
                                     "mv skills skills-old; mkdir skills; echo done"], owner(ws))
    assert "done" in out and "busy" in out.lower(), out
    assert not (root / ".tmp/home/.bashrc").exists() and not (root / ".tmp-old").exists()
    assert (root / "skills/demo/SKILL.md").read_text() == SKILL


async def test_an_approved_write_protected_call_changes_them_and_only_the_owners(ws: Box) -> None:
    root = ws.ws.root
    argv = ["sh", "-c", "echo 'Be brief.' > SOUL.md && echo 'alias ll=ls' > $HOME/.bashrc"]
    assert "change the agent's own files" in ws.tool().needs_approval(Exec.Arguments(argv=argv, write_protected=True),
                                                                      owner(ws, approved=False))
    out = await run(ws, argv, owner(ws, approved=False), write_protected=True)  # not approved: still read-only
    assert (root / "SOUL.md").read_text() == SOUL, out
    out = await run(ws, argv, owner(ws), write_protected=True)
    assert plain_exec(out).startswith("exit code 0"), out
    assert (root / "SOUL.md").read_text() == "Be brief.\n" and (root / ".tmp/home/.bashrc").exists()
    with pytest.raises(ToolError) as refused:  # a guest's program never gets them, approved or not
        await run(ws, ["cp", "notes.txt", "SOUL.md"], replace(ws.ctx, owner=False, approved=True), write_protected=True)
    assert "guest" in refused.value.problem and (root / "SOUL.md").read_text() == "Be brief.\n"


async def test_a_symlinked_prompt_file_makes_the_call_refuse(ws: Box) -> None:
    root = ws.ws.root
    (root / "SOUL.md").unlink()
    os.symlink("notes.txt", root / "SOUL.md")
    with pytest.raises(ToolError) as refused:
        await run(ws, ["cat", "notes.txt"], owner(ws))
    assert "symbolic link" in refused.value.problem and "fix" in refused.value.render()
    assert (root / "notes.txt").read_text() == "needle in the notes\n"


async def test_memory_logs_are_read_only_in_a_tainted_run(ws: Box) -> None:
    root = ws.ws.root
    (root / "memory").mkdir()
    argv = ["sh", "-c", "echo note >> memory/2026-01-01.md; echo done"]
    tainted = Taint()
    tainted.add("web_fetch: http://example.test/")
    out = await run(ws, argv, owner(ws, taint=tainted))
    assert "done" in out and not (root / "memory/2026-01-01.md").exists(), out
    await run(ws, argv, owner(ws))
    assert (root / "memory/2026-01-01.md").read_text() == "note\n"  # an untainted run writes its log


async def test_in_a_tainted_run_the_approval_prompt_names_the_untrusted_content(ws: Box) -> None:
    events = EventHub()
    asked: list[dict] = []
    events.subscribe(lambda e: asked.append(e["request"]) if e["type"] == "approval_request" else None)
    registry = ToolRegistry([ws.tool()], events=events, approvals=ApprovalBroker(events, mode="ask", timeout=0.5))
    tainted = Taint()
    tainted.add("read_file: file inbox/mail.md (not written by the agent)")
    call = {"id": "t1", "name": "exec", "input": {"argv": ["cp", "notes.txt", "SOUL.md"], "write_protected": True}}
    outcome = await registry.execute(call, owner(ws, approved=False, taint=tainted))
    assert outcome.status == "denied" and (ws.ws.root / "SOUL.md").read_text() == SOUL
    [request] = asked
    assert request["reason"].startswith("untrusted content entered this run before this call (read_file: file "
                                        "inbox/mail.md"), request
    assert "may change the agent's own files" in request["summary"] and request["tainted"]


def test_without_the_mount_layer_guest_and_tainted_runs_ask_for_every_program(ws: Box) -> None:
    tool = Exec(ExecSettings(), sandbox=SandboxPolicy.for_paths(ws.paths),
                mounts=lambda: MountStatus(False, "simulated: no bubblewrap"))
    args = Exec.Arguments(argv=["cat", "notes.txt"])
    assert tool.needs_approval(args, owner(ws)) is None  # the owner's own untainted run: as before
    guest = tool.needs_approval(args, replace(ws.ctx, owner=False))
    assert guest and "simulated: no bubblewrap" in guest and "a guest's" in guest
    tainted = Taint()
    tainted.add("web_fetch: http://example.test/")
    assert "this run is tainted" in (tool.needs_approval(args, owner(ws, taint=tainted)) or "")
    assert ws.tool().needs_approval(args, owner(ws, taint=tainted)) is None  # with the mounts: nothing to ask


# the environment -------------------------------------------------------------------------------
async def test_the_child_environment_is_an_allowlist(ws: Box, monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in {"AWS_SECRET_ACCESS_KEY": "aws-secret-3f9", "ANTHROPIC_AUTH_TOKEN": "auth-token-77c",
                        "GITHUB_TOKEN": "ghp-secret-51a", "PYTHONSTARTUP": "/tmp/evil.py", "LANG": "C.UTF-8",
                        "LC_TIME": "C", "MY_TOOL_HOME": "/opt/tool"}.items():
        monkeypatch.setenv(name, value)
    code = "import json, os; print(json.dumps(dict(os.environ)))"
    seen = json.loads(plain_exec(await run(ws, ["python3", "-c", code], owner(ws))).split("\n", 1)[1])
    assert not {"AWS_SECRET_ACCESS_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_API_KEY", "GITHUB_TOKEN",
                "PYTHONSTARTUP", "MY_TOOL_HOME"} & set(seen), seen
    assert seen["LANG"] == "C.UTF-8" and seen["LC_TIME"] == "C"
    assert seen["HOME"] == str(ws.ws.root / ".tmp/home") and seen["TMPDIR"] == str(ws.ws.root / ".tmp")
    assert set(seen) <= {"PATH", "HOME", "TMPDIR", "XDG_CACHE_HOME", "LANG", "LANGUAGE", "TERM", "TZ", "USER",
                         "LOGNAME", "SHELL", "COLORTERM", "NO_COLOR", "LC_TIME", "LC_ALL", "LC_CTYPE", "PWD"}, seen
    assert child_env(["MY_TOOL_HOME"])["MY_TOOL_HOME"] == "/opt/tool"  # the owner may list more names


# the network -----------------------------------------------------------------------------------
@pytest.fixture
def listener() -> Iterator[tuple[int, list[bytes]]]:
    """A TCP listener on 127.0.0.1 that this test owns; records what each connection sent."""
    with tcp_listener() as served:
        yield served


CONNECT = ("import socket, sys\n"
           "try:\n"
           "    s = socket.create_connection(('127.0.0.1', int(sys.argv[1])), timeout=5); s.sendall(b'workspace data')\n"
           "    s.close(); print('sent')\n"
           "except OSError as e: print('refused', type(e).__name__)")


async def test_an_exec_child_cannot_reach_a_loopback_listener_unless_approved_for_network(ws: Box, listener) -> None:
    port, got = listener
    out = await run(ws, ["python3", "-c", CONNECT, str(port)], owner(ws))
    assert "refused" in out and "sent" not in out, out
    out = await run(ws, ["python3", "-c", CONNECT, str(port)], owner(ws, approved=False), network=True)
    assert "refused" in out, out  # asked for, never approved: still no network
    assert got == []
    reason = ws.tool().needs_approval(Exec.Arguments(argv=["python3", "-c", CONNECT], network=True), owner(ws))
    assert reason and "use the network" in reason
    out = await run(ws, ["python3", "-c", CONNECT, str(port)], owner(ws), network=True)
    assert "sent" in out, out
    assert got == [b"workspace data"]
