"""`exec`: run a program without a shell, inside the workspace, with a timeout and an output cap.

No shell means metacharacters (`;`, `|`, `$()`) stay literal arguments. A call runs without
asking only when all of these hold; otherwise the user must approve it, told exactly why:

- argv[0] is a bare name on the allowlist (a path such as `./cat` may be a file the agent wrote);
- that name, looked up on PATH, is not a file inside the workspace;
- no argument refers to a path outside the workspace: absolute paths elsewhere, `..` or
  symlinks leading out (resolved from the call's cwd), `~…`, and the same inside options
  (`--file=/etc/x`, `-o/etc/x`);
- no option makes the program run another program (`sort --compress-program=sh`).

Relative PATH entries (`.`, empty) are dropped for the child: they would name the workspace.
Secrets are removed from the child's environment.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
from pathlib import Path

from pydantic import Field

from config.schema import ExecSettings
from workspace.guard import PathOutsideWorkspace, WorkspaceGuard

from .base import Args, Tool, ToolContext, ToolError
from .files import _resolve

_SECRET_ENV = ("ANTHROPIC_API_KEY", "TELEGRAM_BOT_TOKEN", "OPENAI_API_KEY")
# Long options that make an allowlisted program start another program. GNU tools accept any
# unambiguous prefix of a long option (`--compress=sh`), so prefixes count as well.
_RUNS_PROGRAMS = {"sort": ("--compress-program",)}


class Exec(Tool):
    name = "exec"
    description = (
        "Run a program in the workspace and return its exit code and output. argv is the program "
        "and its arguments as a list; there is no shell (no pipes, globbing or ';'). Programs not "
        "on the allowlist ask the user first. Use it to run tests, scripts and inspection commands."
    )
    side_effects = True

    class Arguments(Args):
        argv: list[str] = Field(min_length=1, description="program and arguments, e.g. ['python3', 'script.py']")
        cwd: str = Field(".", description="working directory relative to the workspace")
        timeout: float | None = Field(None, gt=0, le=3600, description="seconds before the program is killed")

    def __init__(self, settings: ExecSettings) -> None:
        self.settings = settings

    def needs_approval(self, args: Arguments, ctx: ToolContext) -> str | None:
        program = args.argv[0]
        if "/" in program or (os.altsep and os.altsep in program):
            return (f"argv[0] {program!r} is a path, not a program name: running a file by path "
                    "(possibly one written in the workspace) needs approval")
        if program not in self.settings.allowlist:
            return f"{program!r} is not on the exec allowlist (tools.exec.allowlist)"
        try:
            cwd = ctx.workspace.resolve(args.cwd)
        except PathOutsideWorkspace:
            return None  # run() refuses it before anything starts
        found = shutil.which(program, path=_search_path())
        if found and _inside(ctx.workspace, found):
            return f"{program!r} resolves to {os.path.realpath(found)}, a file inside the workspace, not a system program"
        for arg in args.argv[1:]:
            if reason := _option_problem(program, arg) or _path_problem(arg, cwd, ctx.workspace):
                return reason
        return None

    def summarize(self, args: Arguments) -> str:
        return "exec " + " ".join(args.argv)[:300]

    async def run(self, args: Arguments, ctx: ToolContext) -> str:
        cwd = _resolve(ctx, args.cwd)
        if not cwd.is_dir():
            raise ToolError(f"cwd {args.cwd} is not a directory", "pass an existing folder of the workspace")
        env = {k: v for k, v in os.environ.items() if k not in _SECRET_ENV and not k.startswith("CLAWGATE_")}
        env["PATH"] = _search_path()  # the PATH needs_approval looked the program up on
        timeout = args.timeout or self.settings.timeout_seconds
        try:
            proc = await asyncio.create_subprocess_exec(
                *args.argv, cwd=str(cwd), env=env, stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT, start_new_session=True,
            )
        except FileNotFoundError:
            raise ToolError(f"program {args.argv[0]!r} not found", "check the name; there is no shell, so builtins like 'cd' do not exist") from None
        except PermissionError:
            raise ToolError(f"program {args.argv[0]!r} is not executable", "run it through its interpreter, e.g. ['python3', file]") from None
        cap = self.settings.output_cap_bytes
        try:
            output, timed_out = await asyncio.wait_for(_read_capped(proc, cap), timeout), False
        except asyncio.TimeoutError:
            _kill(proc)
            output, timed_out = b"", True
        except asyncio.CancelledError:
            _kill(proc)
            raise
        code = await proc.wait()
        text = output[:cap].decode("utf-8", errors="replace")
        if len(output) > cap:
            text += f"\n[… output capped at {cap} bytes]"
        if timed_out:
            return f"timed out after {timeout:g}s and was killed\n{text}"
        return f"exit code {code}\n{text}" if text else f"exit code {code} (no output)"


def _search_path() -> str:
    """PATH without relative entries: for the child they would mean its cwd, the workspace."""
    entries = os.environ.get("PATH", os.defpath).split(os.pathsep)
    return os.pathsep.join(e for e in entries if os.path.isabs(e))


def _inside(guard: WorkspaceGuard, path: str) -> bool:
    try:
        guard.resolve(path)
    except PathOutsideWorkspace:
        return False
    return True


def _option_problem(program: str, arg: str) -> str | None:
    name = arg.split("=", 1)[0]
    if not name.startswith("--") or len(name) <= 2:
        return None
    for option in _RUNS_PROGRAMS.get(program, ()):
        if option.startswith(name):
            return f"option {arg!r} ({option}) makes {program} run another program"
    return None


def _path_candidates(arg: str) -> list[str]:
    """The argument itself, what follows each '=' (--file=/x), and short-option values (-o/x, -no/x)."""
    candidates = [arg] + [arg[i + 1 :] for i, ch in enumerate(arg) if ch == "="]
    if arg.startswith("-") and not arg.startswith("--"):
        k = 2
        while k < len(arg) and arg[1:k].isalnum():
            candidates.append(arg[k:])
            k += 1
    return candidates


def _path_problem(arg: str, cwd: Path, guard: WorkspaceGuard) -> str | None:
    """Why `arg` may reach outside the workspace when read as a path from `cwd`, or None."""
    if "\x00" in arg:
        return f"argument {arg!r} contains a NUL byte"
    for candidate in _path_candidates(arg):
        if candidate.startswith("~"):
            return f"argument {arg!r} refers to a home-directory path ({candidate!r}) outside the workspace"
        joined = os.path.join(cwd, candidate)
        try:
            if _inside(guard, joined):
                continue
            real = os.path.realpath(joined)
        except (OSError, ValueError):
            return f"argument {arg!r} could not be checked as a path inside the workspace"
        shown = f"{arg!r}" if candidate == arg else f"{arg!r} (path {candidate!r})"
        return f"argument {shown} refers to {real}, outside the workspace {guard.root}"
    return None


async def _read_capped(proc: asyncio.subprocess.Process, cap: int) -> bytes:
    assert proc.stdout is not None
    chunks, size = [], 0
    while True:
        chunk = await proc.stdout.read(65536)
        if not chunk:
            break
        if size <= cap:
            chunks.append(chunk)
        size += len(chunk)  # keep draining so the child never blocks on a full pipe
    return b"".join(chunks)[: cap + 1]


def _kill(proc: asyncio.subprocess.Process) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
