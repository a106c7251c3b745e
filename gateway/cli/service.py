"""`clawgate gateway install|uninstall|start|stop|status`: run the daemon as a systemd user service.

The unit runs the same `clawgate gateway` as the foreground command, so the single-instance
lock (gateway/instance.py) still decides: a service started while a gateway already runs on
the home exits 5, and `RestartPreventExitStatus` keeps systemd from retrying that forever.
Keys live in `$CLAWGATE_HOME/gateway.env` (0600), because a user service does not see the
shell's environment; `install` writes the variables set now into it when it does not exist.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from clawgate.config.paths import Paths

from ..instance import InstanceLock
from .errors import EXIT_ALREADY_RUNNING, EXIT_FAILED, CliError

UNIT = "clawgate.service"
# what systemd accepts as the program path of ExecStart= (its string_is_safe); others go through env(1)
SAFE_EXECUTABLE = re.compile(r"/[^\"'\\$\x00-\x1f\x7f]*")
ENV_BINARY = "/usr/bin/env"
# Variables a service needs but cannot inherit from the shell that installed it.
CARRIED = ("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "OPENAI_API_KEY", "TELEGRAM_BOT_TOKEN")


def unit_dir(environ: dict[str, str] | None = None) -> Path:
    env = os.environ if environ is None else environ
    base = env.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "systemd" / "user"


def env_file(paths: Paths) -> Path:
    return paths.home / "gateway.env"


def _escape(text: str) -> str:
    """Specifiers: a literal % is %% in every setting that expands them (systemd.unit(5))."""
    return text.replace("%", "%%")


def _quoted(text: str, *, command: bool = False) -> str:
    """One word for a setting systemd splits into words (ExecStart=, Environment=), per systemd.syntax(7):
    double-quoted with C escapes, % doubled; in a command line $ is doubled too (it expands variables)."""
    out = []
    for ch in text:
        if ch in '"\\':
            out.append("\\" + ch)
        elif ch == "%":
            out.append("%%")
        elif ch == "$" and command:
            out.append("$$")
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\x{ord(ch):02x}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def _path_value(path: Path, what: str) -> str:
    """A path for a setting that takes the rest of the line as one path (WorkingDirectory=, EnvironmentFile=)."""
    text = str(path)
    if text != text.strip() or any(ord(ch) < 0x20 for ch in text) or text.endswith("\\"):
        raise CliError(f"the {what} path {text!r} cannot be written in a systemd unit (leading or trailing "
                       "space, a control character or a final backslash); set CLAWGATE_HOME to another folder")
    return _escape(text)


def unit_text(paths: Paths, python: str | None = None) -> str:
    """The unit: the current interpreter runs the installed package, so a venv, pipx or uv install all work.

    Every path is quoted or escaped per systemd.syntax(7), so a home or venv with spaces, %, quotes,
    backslashes or non-ASCII letters runs as written."""
    argv = [python or sys.executable, "-m", "clawgate.gateway.cli", "gateway"]
    if not SAFE_EXECUTABLE.fullmatch(argv[0]):
        # systemd refuses quotes, backslashes and control characters in the executable's own path and
        # does not undo $$ there; env(1) takes the interpreter as an argument, where all of them work
        argv.insert(0, ENV_BINARY)
    exec_start = " ".join(_quoted(word, command=i > 0) for i, word in enumerate(argv))
    home = _path_value(paths.home, "CLAWGATE_HOME")
    return f"""[Unit]
Description=clawgate chat agent gateway ({_escape(str(paths.home)).replace(chr(10), " ")})
# No network ordering: a user manager cannot order on the system's network-online.target (in a user
# unit After=/Wants= on it do nothing), and the daemon waits for its peers itself (Telegram polling
# and the model provider retry until the network is up).

[Service]
Type=simple
Environment={_quoted("CLAWGATE_HOME=" + str(paths.home))}
Environment=PYTHONUNBUFFERED=1
WorkingDirectory={home}
# API keys and other settings for the service (a user service does not see your shell's variables)
EnvironmentFile=-{_path_value(env_file(paths), "gateway.env")}
ExecStart={exec_start}
Restart=on-failure
RestartSec=5
# 5: another gateway already runs on this home (its lock); 2: a config error. Restarting cannot fix either.
RestartPreventExitStatus=5 2
KillSignal=SIGTERM
TimeoutStopSec=30

[Install]
WantedBy=default.target
"""


def systemd_missing() -> str | None:
    """Why `systemctl --user` cannot work here (one line), or None when it can."""
    binary = shutil.which("systemctl")
    if binary is None:
        return "systemctl is not available here (no systemd)"
    probe = subprocess.run([binary, "--user", "show-environment"], capture_output=True, text=True, timeout=30)
    if probe.returncode != 0:
        why = (probe.stderr.strip() or f"exit {probe.returncode}").splitlines()[0]
        return f"no systemd user session is reachable here ({why})"
    return None


def _systemctl(*args: str, check: bool = True) -> subprocess.CompletedProcess[str] | None:
    """Run `systemctl --user …`; None when systemd cannot be used here (see systemd_missing)."""
    if systemd_missing() is not None:
        return None
    done = subprocess.run(["systemctl", "--user", *args], capture_output=True, text=True, timeout=60)
    if check and done.returncode != 0:
        why = (done.stderr.strip() or done.stdout.strip() or f"exit {done.returncode}").splitlines()[0]
        raise CliError(f"systemctl --user {' '.join(args)} failed: {why}; "
                       "is a systemd user session running (loginctl enable-linger $USER)?", EXIT_FAILED)
    return done


def _write_env_file(paths: Paths) -> str:
    target = env_file(paths)
    if target.exists():
        return f"kept {target}"
    carried = {k: os.environ[k] for k in CARRIED if os.environ.get(k)}
    carried.update({k: v for k, v in os.environ.items() if k.startswith("CLAWGATE_") and k != "CLAWGATE_HOME"})
    target.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write("# Environment of the clawgate service (KEY=value lines). Keep it private (0600).\n")
        fh.writelines(f"{k}={v}\n" for k, v in sorted(carried.items()))
    names = ", ".join(sorted(carried)) or "no variables"
    return f"wrote {target} ({names})"


def cmd_install(paths: Paths, show: bool) -> int:
    text = unit_text(paths)
    if show:
        print(text, end="")
        return 0
    folder = unit_dir()
    folder.mkdir(parents=True, exist_ok=True)
    unit = folder / UNIT
    unit.write_text(text, encoding="utf-8")
    print(f"wrote {unit}")
    print(_write_env_file(paths))
    if (missing := systemd_missing()) is not None:
        print(f"{missing}: the unit is written; where systemd runs, run `systemctl --user daemon-reload && "
              f"systemctl --user enable --now {UNIT}`")
        return 0
    _systemctl("daemon-reload")
    _systemctl("enable", UNIT)
    print(f"enabled {UNIT}; start it with `clawgate gateway start`")
    return 0


def cmd_uninstall(paths: Paths) -> int:
    unit = unit_dir() / UNIT
    if (missing := systemd_missing()) is not None:
        print(f"{missing}: removing the unit file only")
    else:
        _systemctl("disable", "--now", UNIT, check=False)
    if unit.exists():
        unit.unlink()
        print(f"removed {unit} (kept {env_file(paths)})")
    else:
        print(f"no unit at {unit}")
    _systemctl("daemon-reload", check=False)
    return 0


def cmd_start_stop(paths: Paths, action: str) -> int:
    if not (unit_dir() / UNIT).exists():
        raise CliError("the service is not installed; run `clawgate gateway install` first", EXIT_FAILED)
    holder = InstanceLock(paths).holder()
    if action == "start" and holder is not None and holder.is_gateway:
        raise CliError(f"a gateway already runs on {paths.home} (pid {holder.pid}); stop it (kill {holder.pid}) "
                       "before starting the service", EXIT_ALREADY_RUNNING)
    if (missing := systemd_missing()) is not None:
        raise CliError(f"{missing}; run `clawgate gateway` in the foreground instead", EXIT_FAILED)
    _systemctl(action, UNIT)
    print(f"{'started' if action == 'start' else 'stopped'} {UNIT}")
    return 0


def cmd_status(paths: Paths) -> int:
    unit = unit_dir() / UNIT
    print(f"unit     {unit if unit.exists() else 'not installed'}")
    done = _systemctl("is-active", UNIT, check=False)
    if done is None:
        state = systemd_missing() or "unknown"
    else:
        state = (done.stdout.strip() or done.stderr.strip() or "unknown").splitlines()[0]
    print(f"service  {state}")
    holder = InstanceLock(paths).holder()
    running = holder is not None and holder.is_gateway
    print(f"gateway  {f'running (pid {holder.pid})' if running and holder else 'not running'} on {paths.home}")
    return 0 if running else 3


def cmd_service(args: argparse.Namespace) -> int:
    paths = Paths.from_env()
    action = args.action
    if action == "install":
        return cmd_install(paths, args.print)
    if args.print:
        raise CliError("--print goes with `clawgate gateway install`", 2)
    if action == "uninstall":
        return cmd_uninstall(paths)
    if action in ("start", "stop"):
        return cmd_start_stop(paths, action)
    return cmd_status(paths)
