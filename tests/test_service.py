"""`clawgate gateway install|uninstall|start|stop|status`: the systemd user unit and the lock it respects."""

from __future__ import annotations

import configparser
import os
import shlex
import stat
import subprocess
import sys
from pathlib import Path

from tests.harness import ROOT, DaemonProcess


def cli(daemon: DaemonProcess, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gateway.cli", *args], env={**daemon.env, **(env or {})}, cwd=ROOT,
                          capture_output=True, text=True, timeout=60)


def parse_unit(text: str) -> configparser.ConfigParser:
    unit = configparser.ConfigParser(strict=False, interpolation=None)
    unit.optionxform = str  # type: ignore[assignment,method-assign]
    unit.read_string(text)
    return unit


def no_systemctl(tmp_path: Path) -> dict[str, str]:
    empty = tmp_path / "empty-bin"
    empty.mkdir(exist_ok=True)
    return {"PATH": str(empty), "XDG_CONFIG_HOME": str(tmp_path / "xdg")}


def test_print_shows_the_unit(tmp_path: Path) -> None:
    proc = DaemonProcess(tmp_path / "home", anthropic_url=None)
    out = cli(proc, "gateway", "install", "--print")
    assert out.returncode == 0, out.stderr
    unit = parse_unit(out.stdout)["Service"]
    assert shlex.split(unit["ExecStart"]) == [sys.executable, "-m", "gateway.cli", "gateway"]
    assert unit["Restart"] == "on-failure" and "5" in unit["RestartPreventExitStatus"].split()
    assert f"\nEnvironment=CLAWGATE_HOME={proc.home}\n" in out.stdout
    assert f"EnvironmentFile=-{proc.home}/gateway.env" in out.stdout
    assert parse_unit(out.stdout)["Install"]["WantedBy"] == "default.target"
    assert not (tmp_path / "xdg").exists()


def test_install_writes_the_unit_and_a_private_env_file_and_says_systemd_is_missing(tmp_path: Path) -> None:
    proc = DaemonProcess(tmp_path / "home", anthropic_url="http://127.0.0.1:9")
    env = no_systemctl(tmp_path)
    out = cli(proc, "gateway", "install", env=env)
    assert out.returncode == 0, out.stderr
    unit_file = tmp_path / "xdg/systemd/user/clawgate.service"
    assert unit_file.read_text() == cli(proc, "gateway", "install", "--print").stdout
    assert sum("systemctl is not available here" in line for line in out.stdout.splitlines()) == 1, out.stdout
    env_file = proc.home / "gateway.env"
    assert stat.S_IMODE(env_file.stat().st_mode) == 0o600
    assert "ANTHROPIC_API_KEY=test-key" in env_file.read_text().splitlines()
    assert f"CLAWGATE_GATEWAY__PORT={proc.port}" in env_file.read_text().splitlines()
    env_file.write_text("ANTHROPIC_API_KEY=edited-by-hand\n")
    assert "kept" in cli(proc, "gateway", "install", env=env).stdout
    assert env_file.read_text() == "ANTHROPIC_API_KEY=edited-by-hand\n"

    start = cli(proc, "gateway", "start", env=env)
    assert start.returncode == 1 and start.stderr.count("\n") == 1 and "foreground" in start.stderr
    status = cli(proc, "gateway", "status", env=env)
    assert status.returncode == 3 and "systemctl is not available" in status.stdout and "not running" in status.stdout

    out = cli(proc, "gateway", "uninstall", env=env)
    assert out.returncode == 0 and not unit_file.exists() and env_file.exists()
    again = cli(proc, "gateway", "start", env=env)
    assert again.returncode == 1 and "not installed" in again.stderr


def test_systemctl_is_driven_when_present(tmp_path: Path) -> None:
    proc = DaemonProcess(tmp_path / "home", anthropic_url=None)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    calls = tmp_path / "calls.txt"
    fake = bin_dir / "systemctl"  # records what it is asked, like a user manager that accepts everything
    fake.write_text(f"#!/bin/sh\necho \"$*\" >> {calls}\n[ \"$2\" = is-active ] && echo active\nexit 0\n")
    fake.chmod(0o755)
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "XDG_CONFIG_HOME": str(tmp_path / "xdg")}
    assert cli(proc, "gateway", "install", env=env).returncode == 0
    assert cli(proc, "gateway", "start", env=env).returncode == 0
    assert "service  active" in cli(proc, "gateway", "status", env=env).stdout
    assert cli(proc, "gateway", "stop", env=env).returncode == 0
    assert cli(proc, "gateway", "uninstall", env=env).returncode == 0
    asked = [line for line in calls.read_text().splitlines() if "show-environment" not in line]
    assert asked == ["--user daemon-reload", "--user enable clawgate.service", "--user start clawgate.service",
                     "--user is-active clawgate.service", "--user stop clawgate.service",
                     "--user disable --now clawgate.service", "--user daemon-reload"]


def test_the_unit_respects_the_single_instance_lock(daemon, tmp_path: Path) -> None:
    env = no_systemctl(tmp_path)
    assert cli(daemon, "gateway", "install", env=env).returncode == 0
    (tmp_path / "xdg/systemd/user/clawgate.service").write_text("")  # installed; the content is checked above
    start = cli(daemon, "gateway", "start", env=env)
    assert start.returncode == 5 and f"pid {daemon.proc.pid}" in start.stderr
    status = cli(daemon, "gateway", "status", env=env)
    assert status.returncode == 0 and f"running (pid {daemon.proc.pid})" in status.stdout
    # What systemd would run, with the environment the unit gives it: the lock refuses it (exit 5,
    # which RestartPreventExitStatus lists, so systemd does not retry it forever).
    unit = parse_unit(cli(daemon, "gateway", "install", "--print").stdout)["Service"]
    service_env = {k: v for k, v in os.environ.items() if not k.startswith("CLAWGATE_")}
    service_env.update(line.split("=", 1) for line in (daemon.home / "gateway.env").read_text().splitlines()
                       if "=" in line and not line.startswith("#"))
    service_env["CLAWGATE_HOME"] = str(daemon.home)
    ran = subprocess.run(shlex.split(unit["ExecStart"]), env=service_env, capture_output=True, text=True, timeout=60)
    assert ran.returncode == 5 and "already running" in ran.stderr
