"""`exec`: run a program without a shell, inside the workspace, with a timeout and an output cap.

No shell means metacharacters (`;`, `|`, `$()`) stay literal arguments. Programs outside
the allowlist need the user's approval. Secrets are removed from the child's environment.
"""

from __future__ import annotations

import asyncio
import os
import signal

from pydantic import Field

from config.schema import ExecSettings

from .base import Args, Tool, ToolContext, ToolError
from .files import _resolve

_SECRET_ENV = ("ANTHROPIC_API_KEY", "TELEGRAM_BOT_TOKEN", "OPENAI_API_KEY")


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
        program = os.path.basename(args.argv[0])
        if program in self.settings.allowlist:
            return None
        return f"{program!r} is not on the exec allowlist"

    def summarize(self, args: Arguments) -> str:
        return "exec " + " ".join(args.argv)[:300]

    async def run(self, args: Arguments, ctx: ToolContext) -> str:
        cwd = _resolve(ctx, args.cwd)
        if not cwd.is_dir():
            raise ToolError(f"cwd {args.cwd} is not a directory", "pass an existing folder of the workspace")
        env = {k: v for k, v in os.environ.items() if k not in _SECRET_ENV and not k.startswith("CLAWGATE_")}
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
