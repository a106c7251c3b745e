"""The `clawgate` command. User errors print one line and exit non-zero; never a traceback."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any, Sequence

from config.loader import ConfigError, load
from config.paths import Paths
from config.token import gateway_token

from . import __version__


def _fail(message: str, code: int = 2) -> int:
    print(f"clawgate: {message}", file=sys.stderr)
    return code


# commands ---------------------------------------------------------------------
def cmd_init(args: argparse.Namespace) -> int:
    from .init import write_config, write_workspace

    paths = Paths.from_env()
    interactive = sys.stdin.isatty() and not args.yes
    config_file, created = write_config(paths)
    print(f"{'wrote' if created else 'kept existing'} {config_file}")
    try:
        _, settings = load()
    except ConfigError as exc:
        return _fail(str(exc))
    workspace = os.path.expanduser(settings.agent.workspace) if settings.agent.workspace else str(paths.default_workspace)
    made = write_workspace(Path(workspace))
    print(f"workspace {workspace}: {len(made)} template file(s) added, existing files kept")
    paths.ensure()
    if interactive:
        print("Next: export ANTHROPIC_API_KEY=… (and TELEGRAM_BOT_TOKEN=… for Telegram), then `clawgate gateway`.")
    return 0


def cmd_gateway(args: argparse.Namespace) -> int:
    from .app import App
    from .logs import setup_logging

    try:
        paths, settings = load()
    except ConfigError as exc:
        return _fail(str(exc))
    if args.port is not None:
        settings.gateway.port = args.port
    setup_logging(settings.log.level)
    from agent.redact import register_secrets

    register_secrets([settings.gateway.token, settings.providers.anthropic.api_key, settings.channels.telegram.token])

    async def main() -> bool:
        return await App(paths, settings).run()

    try:
        if asyncio.run(main()):
            return _fail("the daemon stopped after an internal failure (see the log above); restart it", 1)
    except OSError as exc:
        if exc.errno in (98, 48):
            return _fail(f"port {settings.gateway.port} is in use (another gateway running?); stop it or set CLAWGATE_GATEWAY__PORT")
        return _fail(f"gateway failed to start: {exc.strerror or exc}")
    except KeyboardInterrupt:
        pass
    return 0


async def _with_client(fn, subscribe=None) -> int:
    from .client import GatewayClient, GatewayError, gateway_url

    try:
        paths, settings = load()
    except ConfigError as exc:
        return _fail(str(exc))
    url = gateway_url(settings)
    try:
        async with GatewayClient(url, gateway_token(paths, settings), subscribe=subscribe) as client:
            return await fn(client)
    except (ConnectionRefusedError, OSError) as exc:
        if isinstance(exc, ConnectionRefusedError) or getattr(exc, "errno", None) in (111, 61):
            return _fail(f"no gateway is running at {url}; start it with `clawgate gateway` (or `make run`)", 3)
        return _fail(f"cannot reach the gateway at {url}: {exc}", 3)
    except GatewayError as exc:
        return _fail(exc.message, 1)
    except Exception as exc:
        from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidStatus

        if isinstance(exc, ConnectionClosed):
            reason = exc.rcvd.reason if exc.rcvd else "connection closed"
            return _fail(f"the gateway closed the connection: {reason}", 1)
        if isinstance(exc, InvalidStatus) and exc.response.status_code == 503:
            reason = exc.response.body.decode("utf-8", "replace").strip() if exc.response.body else "busy"
            return _fail(f"the gateway refused the connection: {' '.join(reason.split())[:200]}", 1)
        if isinstance(exc, InvalidHandshake):
            return _fail(f"{url} is not a clawgate gateway ({exc})", 1)
        raise


def cmd_chat(args: argparse.Namespace) -> int:
    async def one(client) -> int:
        streamed = []
        result = await client.chat(args.message, session=args.session,
                                   on_delta=(lambda t: (streamed.append(t), print(t, end="", flush=True))) if args.stream else None)
        if result["state"] == "error":
            print(result["text"], file=sys.stderr)
            return 1
        if args.stream:
            print()
        else:
            print(result["text"])
        return 0

    async def repl(client) -> int:
        print(f"clawgate chat — session {args.session!r}. /quit to leave, /new to reset the session.")
        loop = asyncio.get_running_loop()
        while True:
            try:
                line = await loop.run_in_executor(None, lambda: input("you> "))
            except EOFError:
                print()
                return 0
            line = line.strip()
            if not line:
                continue
            if line in ("/quit", "/exit"):
                return 0
            if line == "/new":
                await client.request("sessions.reset", {"session": args.session})
                print("(session reset)")
                continue
            print("agent> ", end="", flush=True)
            result = await client.chat(line, session=args.session, on_delta=lambda t: print(t, end="", flush=True))
            print() if result["state"] != "error" else print(f"\n[error] {result['text']}")

    return asyncio.run(_with_client(one if args.message is not None else repl))


def cmd_status(args: argparse.Namespace) -> int:
    async def show(client) -> int:
        status = await client.request("status")
        if args.json:
            print(json.dumps(status, indent=2))
        else:
            for key, value in status.items():
                print(f"{key:15} {value}")
        return 0

    return asyncio.run(_with_client(show))


# parser -------------------------------------------------------------------------
def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="clawgate", description="Self-hosted chat agent daemon.")
    parser.add_argument("--version", action="version", version=f"clawgate {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("init", help="write config.toml (with a gateway token) and the workspace templates")
    p.add_argument("--yes", "-y", action="store_true", help="ask nothing")
    p.set_defaults(fn=cmd_init)

    p = sub.add_parser("gateway", help="run the daemon in the foreground")
    p.add_argument("--port", type=int, help="override gateway.port")
    p.set_defaults(fn=cmd_gateway)

    p = sub.add_parser("chat", help="chat with the agent through the running gateway")
    p.add_argument("-m", "--message", help="send one message, print the answer, exit")
    p.add_argument("--session", default="main", help="session key (default: main)")
    p.add_argument("--stream", action="store_true", help="print the answer as it streams")
    p.set_defaults(fn=cmd_chat)

    p = sub.add_parser("status", help="show the running daemon's status")
    p.add_argument("--json", action="store_true")
    p.set_defaults(fn=cmd_status)

    from . import cli_tasks

    cli_tasks.add_commands(sub)
    from . import cli_cron

    cli_cron.add_commands(sub)
    from . import cli_pairing

    cli_pairing.add_commands(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    # Everything clawgate creates (state, logs, SQLite's -wal/-shm, the workspace templates, files
    # the agent's commands write) holds conversations or secrets: user-only whatever umask the
    # shell or service manager passed down. Files with explicit modes keep them as well.
    os.umask(0o077)
    try:
        return args.fn(args)
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
