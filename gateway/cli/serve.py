"""`clawgate gateway`: run the daemon in the foreground, one per CLAWGATE_HOME.

The instance lock is taken here, before the daemon is built and binds its port, and held
until it has stopped; see gateway/instance.py for why a lock and not the pid file.
"""

from __future__ import annotations

import argparse
import errno
from typing import Any

from ..instance import DAEMON_WAIT_SECONDS, GATEWAY, AlreadyRunning, InstanceLock, remove_pid_file
from .errors import EXIT_ALREADY_RUNNING, EXIT_FAILED, EXIT_USAGE, CliError


def cmd_gateway(args: argparse.Namespace) -> int:
    from clawgate.config.loader import load

    if args.action is not None:  # the service commands (service.py)
        from .service import cmd_service

        return cmd_service(args)

    paths, settings = load()  # ConfigError: one line from main, exit 2
    if args.port is not None:
        settings.gateway.port = args.port
    lock = InstanceLock(paths)
    try:  # a fleet's processes may share one home (docs/fleet.md): they hold its lock together
        lock.acquire(GATEWAY, wait=DAEMON_WAIT_SECONDS, shared=bool(settings.fleet.redis_url))
    except AlreadyRunning as exc:
        holder = exc.holder
        if holder.is_gateway:
            raise CliError(f"a gateway is already running on {paths.home} (pid {holder.pid}); stop it first "
                           f"(kill {holder.pid}) or give this one another CLAWGATE_HOME", EXIT_ALREADY_RUNNING) from None
        raise CliError(f"{holder.describe()} has held {exc.lock_file} for {DAEMON_WAIT_SECONDS:g} s; "
                       "start the gateway again when it has finished", EXIT_FAILED) from None
    try:
        return _serve(paths, settings)
    finally:
        remove_pid_file(paths.pid_file)  # ours only, e.g. left by a daemon that failed while stopping
        lock.release()


def _serve(paths: Any, settings: Any) -> int:
    from clawgate.agent.core.redact import register_secrets
    from clawgate.agent.core.statedb import StateUnavailable
    from clawgate.agent.fleet.errors import FleetUnavailable

    from clawgate.config.entry_point_scan import one_entry_point_scan

    from .. import runtime
    from ..logs import setup_logging

    with one_entry_point_scan():  # a plugin lookup while the app's modules load: from the scan pydantic's made
        from ..app import App

    log = settings.log
    setup_logging(log.level, file=paths.log_file if log.file else None, max_bytes=log.file_max_bytes,
                  backups=log.file_backups)
    transcription = settings.channels.telegram.transcription
    register_secrets([settings.gateway.token, settings.providers.anthropic.api_key, settings.channels.telegram.token,
                      transcription.api_key if transcription else None])

    async def run() -> bool:
        return await App(paths, settings).run()

    try:
        failed = runtime.run(run(), settings.gateway.event_loop)
    except runtime.RuntimeUnavailable as exc:
        raise CliError(str(exc), EXIT_USAGE) from None
    except (StateUnavailable, FleetUnavailable) as exc:
        raise CliError(str(exc), EXIT_FAILED) from None
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            raise CliError(f"port {settings.gateway.port} is in use by another program; stop it or set gateway.port "
                           "(CLAWGATE_GATEWAY__PORT)", EXIT_USAGE) from None
        raise CliError(f"gateway failed to start: {exc.strerror or exc}", EXIT_USAGE) from None
    if failed:
        raise CliError("the daemon stopped after an internal failure (see the log above); restart it", EXIT_FAILED)
    return 0


def add_commands(sub: Any) -> None:
    p = sub.add_parser("gateway", help="run the daemon in the foreground (one per CLAWGATE_HOME), or manage it as a "
                                       "systemd user service", epilog="status exits 0 when a gateway runs, 3 when none")
    p.add_argument("action", nargs="?", choices=["install", "uninstall", "start", "stop", "status"],
                   help="manage the systemd user service instead of running in the foreground")
    p.add_argument("--print", action="store_true", help="with install: print the unit instead of writing it")
    p.add_argument("--port", type=int, help="override gateway.port")
    p.set_defaults(fn=cmd_gateway)
