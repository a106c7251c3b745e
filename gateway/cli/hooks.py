"""`clawgate hooks list|add|remove|test`: the `[hooks.<name>]` tables of config.toml, and a signed test call.

add and remove edit config.toml itself (tomlkit keeps its comments and layout), after checking the
new table exactly as the daemon will (config/hooks.py, agent/triggers/hooks.py), and write it
atomically, owner-only; the daemon reads its hooks at start, so a running one is restarted to take
the change. `test` signs a request as the hook's sender would and sends it to the running daemon's
listener, so a whole path (secret, template, run, delivery) can be tried without the real sender.
"""

from __future__ import annotations

import argparse
import json
import secrets
import time
import uuid
from pathlib import Path
from typing import Any

from clawgate.config.loader import ConfigError, load
from clawgate.config.paths import Paths

from .errors import EXIT_FAILED, EXIT_NO_DAEMON, CliError
from .output import command_group, print_json, print_table, subcommand

RESTART = "restart the gateway to apply it (it reads its hooks at start)"


def _public(name: str, table: Any) -> dict[str, Any]:
    """A hook as listed: never its secret."""
    auth = "bearer token" if table.token else f"hmac ({table.signature_scheme}, header {table.header})"
    if table.kind == "imap":
        auth = f"mailbox {(table.imap or {}).get('imap_folder', 'INBOX')} on {(table.imap or {}).get('imap_host')}"
    return {"name": name, "enabled": table.enabled, "kind": table.kind, "auth": auth,
            "session": table.session_key(name), "deliver": table.deliver or "none", "agent": table.agent,
            "message": table.message}


def cmd_list(args: argparse.Namespace) -> int:
    _, settings = load()
    hooks = [_public(name, table) for name, table in sorted(settings.hooks.items())]
    if args.json:
        print_json(hooks)
        return 0
    if not hooks:
        print("no hooks; add one with `clawgate hooks add NAME --message 'CI says: {{ body.status }}'`")
        return 0
    where = f"http://{settings.gateway.hooks_host}:{settings.gateway.hooks_port}/hooks/<name>"
    rows = [("NAME", "AUTH", "SESSION", "DELIVER", "STATE")]
    rows += [(h["name"], h["auth"], h["session"], h["deliver"], "on" if h["enabled"] else "off") for h in hooks]
    print_table(rows)
    print(f"called at {where}")
    return 0


def _document(paths: Paths) -> Any:
    import tomlkit

    if not paths.config_file.exists():
        return tomlkit.document()
    try:
        return tomlkit.parse(paths.config_file.read_text(encoding="utf-8"))
    except Exception as exc:  # tomlkit's parse errors name the line
        raise CliError(f"{paths.config_file} is not valid TOML ({exc}); fix the line it names") from None


def _write(paths: Paths, document: Any) -> None:
    from clawgate.agent.core.fsio import atomic_write_text

    import tomlkit

    atomic_write_text(paths.config_file, tomlkit.dumps(document), mode=0o600)


def _check(name: str, table: dict[str, Any]) -> Any:
    """The table as the daemon will read it, or one line saying what is wrong (never a secret's value)."""
    from pydantic import ValidationError

    from clawgate.agent.triggers.hooks import build_hooks
    from clawgate.config.hooks import HookSettings, check_hook_names

    try:
        check_hook_names({name: table})  # type: ignore[dict-item]
        settings = HookSettings.model_validate(table)
        build_hooks({name: settings})
    except ValueError as exc:
        if isinstance(exc, ValidationError):
            first = exc.errors()[0]
            key = ".".join(["hooks", name, *(str(p) for p in first["loc"])])
            raise CliError(f"{key}: {first['msg'].lower()}") from None
        raise CliError(str(exc)) from None
    except ConfigError as exc:
        raise CliError(str(exc).removeprefix("config error: ")) from None
    return settings


def cmd_add(args: argparse.Namespace) -> int:
    paths, _ = load()
    document = _document(paths)
    hooks = document.get("hooks") or {}
    if args.name in hooks:
        raise CliError(f"hook {args.name!r} already exists; remove it first (`clawgate hooks remove {args.name}`) "
                       "or edit its table in config.toml", EXIT_FAILED)
    if args.scheme and args.hmac_secret is None:
        raise CliError("--scheme goes with --hmac-secret (a signed hook); a bearer token has no scheme")
    table: dict[str, Any] = {}
    generated = args.hmac_secret is None and args.token is None
    if args.hmac_secret is not None:
        table["hmac_secret"] = args.hmac_secret
        if args.scheme:
            table["signature_scheme"] = args.scheme
    else:
        table["token"] = args.token or secrets.token_urlsafe(24)
    for key in ("message", "session", "agent", "deliver", "id_header"):
        if getattr(args, key) is not None:
            table[key] = getattr(args, key)
    settings = _check(args.name, table)
    import tomlkit

    from clawgate.agent.triggers.hooks import build_hooks

    if "hooks" not in document:
        document["hooks"] = tomlkit.table(is_super_table=True)
    document["hooks"][args.name] = table
    _write(paths, document)
    print(f"added hook {args.name}: POST /hooks/{args.name}, session {settings.session_key(args.name)}, "
          f"delivers to {build_hooks({args.name: settings})[args.name].deliver or 'none'}; {RESTART}")
    if generated:
        print(f"its bearer token (the sender sends Authorization: Bearer <token>): {table['token']}")
    return 0


def cmd_remove(args: argparse.Namespace) -> int:
    paths, _ = load()
    document = _document(paths)
    hooks = document.get("hooks")
    if hooks is None or args.name not in hooks:
        raise CliError(f"no hook {args.name!r} in {paths.config_file}; `clawgate hooks list` shows them", EXIT_FAILED)
    del hooks[args.name]
    if not hooks:
        del document["hooks"]
    _write(paths, document)
    print(f"removed hook {args.name}; {RESTART}")
    return 0


def cmd_test(args: argparse.Namespace) -> int:
    import httpx

    from clawgate.agent.triggers.hooks import sign
    from clawgate.agent.triggers.jobs import parse_deliver

    _, settings = load()
    table = settings.hooks.get(args.name)
    if table is None:
        raise CliError(f"no hook {args.name!r} in config.toml; `clawgate hooks list` shows them", EXIT_FAILED)
    if table.kind == "imap":
        raise CliError(f"hook {args.name} watches a mailbox, it is not called over HTTP; send a mail to "
                       f"{(table.imap or {}).get('username')} to try it", EXIT_FAILED)
    if args.body is not None:
        try:
            body = Path(args.body).read_bytes()
        except OSError as exc:
            raise CliError(f"cannot read {args.body} ({exc.strerror}); give a file holding the request body") from None
    else:
        body = json.dumps({"test": True, "hook": args.name, "sentAt": time.time()}).encode()
    try:
        json.loads(body)
        kind = "application/json"
    except ValueError:
        kind = "text/plain; charset=utf-8"
    headers = {"Content-Type": kind, **sign(table, body, time.time())}
    if table.id_header:
        headers[table.id_header] = f"test-{uuid.uuid4().hex[:12]}"
    host = settings.gateway.hooks_host
    host = "127.0.0.1" if host in ("0.0.0.0", "", "::") else host
    url = f"http://{host if ':' not in host else f'[{host}]'}:{settings.gateway.hooks_port}/hooks/{args.name}"
    try:
        response = httpx.post(url, content=body, headers=headers, timeout=30.0)
    except httpx.ConnectError:
        raise CliError(f"nothing listens at {url}; start the gateway (`clawgate gateway`), with hook "
                       f"{args.name} enabled", EXIT_NO_DAEMON) from None
    except httpx.HTTPError as exc:
        raise CliError(f"the call to {url} failed ({type(exc).__name__}); is the gateway running?", EXIT_NO_DAEMON) from None
    try:
        answer = response.json()
    except ValueError:
        answer = {}
    if response.status_code != 202:
        why = answer.get("error") or response.reason_phrase
        hint = "; the running gateway was started with another secret, restart it" if response.status_code == 401 else ""
        hint = "; the running gateway does not have it, restart it" if response.status_code == 404 else hint
        raise CliError(f"hook {args.name} answered {response.status_code}: {why}{hint}", EXIT_FAILED)
    if args.json:
        print_json(answer)
        return 0
    again = " (a repeat of an earlier delivery: not run again)" if answer.get("duplicate") else ""
    deliver = parse_deliver(table.deliver)
    print(f"hook {args.name} accepted the call as run {answer['id']}{again}; its answer goes to "
          f"{deliver or 'the history of ' + table.session_key(args.name)}")
    return 0


def add_commands(sub: Any) -> None:
    hsub = command_group(sub, "hooks", "inbound webhooks ([hooks.<name>] in config.toml): list, add, remove, test")
    subcommand(hsub, "list", "list the configured hooks (never their secrets)", cmd_list, json=True)
    p = hsub.add_parser("add", help="add a [hooks.<name>] table to config.toml",
                        description="Add an inbound webhook, called with POST /hooks/NAME on the webhook listener "
                                    "(gateway.hooks_host, gateway.hooks_port). Without --token or --hmac-secret a "
                                    "bearer token is generated and printed once.")
    p.add_argument("name")
    secret = p.add_mutually_exclusive_group()
    secret.add_argument("--token", help="the bearer secret the sender sends (at least 16 characters)")
    secret.add_argument("--hmac-secret", help="the secret the sender signs the body with")
    p.add_argument("--scheme", choices=("github", "stripe"), help="with --hmac-secret: the signature's format (default github)")
    p.add_argument("--message", "-m", help="the template the agent is told, e.g. 'CI says: {{ body.status }}'")
    p.add_argument("--session", help="the session its runs happen in (default hooks:NAME)")
    p.add_argument("--agent", help="the agent that answers")
    p.add_argument("--deliver", metavar="TARGET", help="<channel>:<chat id> (telegram:<chat_id>, ...), gateway[:<session>] "
                                                          "or none (default: only the history)")
    p.add_argument("--id-header", help="the header naming each delivery, e.g. X-GitHub-Delivery (default: the body's hash)")
    p.set_defaults(fn=cmd_add)
    subcommand(hsub, "remove", "remove a hook's table from config.toml", cmd_remove, "name")
    p = subcommand(hsub, "test", "send the running gateway a call signed with the hook's secret", cmd_test, "name",
                   json=True)
    p.add_argument("--body", metavar="FILE", help="the request body (default: a small JSON test object)")
