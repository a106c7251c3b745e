"""`clawgate gateway install|uninstall|start|stop|status`: the systemd user unit and the lock it respects."""

from __future__ import annotations

import configparser
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from clawgate.config.paths import Paths
from clawgate.gateway.cli.service import unit_text
from tests.harness import ROOT, DaemonProcess
from tests.zygote import outside_environment


def cli(daemon: DaemonProcess, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "clawgate.gateway.cli", *args], env={**daemon.env, **(env or {})}, cwd=ROOT,
                          capture_output=True, text=True, timeout=60)


def parse_unit(text: str) -> configparser.ConfigParser:
    unit = configparser.ConfigParser(strict=False, interpolation=None)
    unit.optionxform = str  # type: ignore[assignment,method-assign]
    unit.read_string(text)
    return unit


# --- a small reader of systemd.syntax(7), enough to read back what the unit says ----------------
_ESCAPES = {"\\": "\\", '"': '"', "'": "'", "n": "\n", "t": "\t", "r": "\r", "s": " ", "a": "\a", "b": "\b",
            "f": "\f", "v": "\v"}


def systemd_words(value: str) -> list[str]:
    """Words as systemd's extract_first_word(UNQUOTE | CUNESCAPE) splits a value: quotes group,
    backslash escapes are C escapes (in and out of quotes)."""
    words: list[str] = []
    i, n = 0, len(value)
    while True:
        while i < n and value[i] in " \t":
            i += 1
        if i >= n:
            return words
        word: list[str] = []
        quote: str | None = None
        while i < n:
            ch = value[i]
            if quote and ch == quote:
                quote, i = None, i + 1
                continue
            if not quote and ch in " \t":
                break
            if not quote and ch in "\"'":
                quote, i = ch, i + 1
                continue
            if ch == "\\":
                code = value[i + 1]
                if code == "x":
                    word.append(chr(int(value[i + 2:i + 4], 16)))
                    i += 4
                    continue
                assert code in _ESCAPES, f"unknown escape \\{code} in {value!r}"
                word.append(_ESCAPES[code])
                i += 2
                continue
            word.append(ch)
            i += 1
        assert quote is None, f"unterminated quote in {value!r}"
        words.append("".join(word))


def specifiers(value: str) -> str:
    """systemd expands %x specifiers; the unit must only use %% (a literal %)."""
    out, i = [], 0
    while i < len(value):
        if value[i] == "%":
            assert value[i + 1:i + 2] == "%", f"an unescaped specifier in {value!r}"
            out.append("%")
            i += 2
        else:
            out.append(value[i])
            i += 1
    return "".join(out)


def dollars(word: str) -> str:
    """ExecStart= arguments expand $VAR; the unit must only use $$ (a literal $)."""
    out, i = [], 0
    while i < len(word):
        if word[i] == "$":
            assert word[i + 1:i + 2] == "$", f"a variable would be expanded in {word!r}"
            out.append("$")
            i += 2
        else:
            out.append(word[i])
            i += 1
    return "".join(out)


def read_unit(text: str) -> dict[str, dict[str, list[str]]]:
    """Sections of key -> raw values (a key may repeat); comments and blank lines skipped."""
    sections: dict[str, dict[str, list[str]]] = {}
    current: dict[str, list[str]] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line[0] in "#;":
            continue
        if line.startswith("["):
            current = sections.setdefault(line.strip("[]"), {})
            continue
        key, sep, value = line.partition("=")
        assert sep and not line.endswith("\\"), f"not a setting: {line!r}"
        current.setdefault(key.strip(), []).append(value.strip())
    return sections


def service_command(unit: dict[str, dict[str, list[str]]]) -> list[str]:
    """What systemd runs: the program path as written (it must be one systemd accepts), then the arguments."""
    (raw,) = unit["Service"]["ExecStart"]
    program, *args = systemd_words(specifiers(raw))
    assert program.startswith("/") and not any(c in program for c in "\"'\\$") and program.isprintable(), program
    return [program, *(dollars(a) for a in args)]


def service_env(unit: dict[str, dict[str, list[str]]]) -> dict[str, str]:
    pairs = [w for raw in unit["Service"].get("Environment", []) for w in systemd_words(specifiers(raw))]
    return dict(p.split("=", 1) for p in pairs)


AWKWARD = ["with space", "100% sure", 'say "hi"', "it's", "back\\slash", "ünïcödé ✓ 日本", "$HOME and ${X}",
           "all of it % \" ' \\ $ é"]


@pytest.mark.parametrize("name", AWKWARD)
def test_units_for_awkward_paths_read_back_as_written(tmp_path: Path, name: str) -> None:
    home = tmp_path / f"home {name}"
    python = tmp_path / f"venv {name}" / "bin" / "python3"
    python.parent.mkdir(parents=True)
    python.symlink_to(sys.executable)
    home.mkdir()
    text = unit_text(Paths(home), python=str(python))
    unit = read_unit(text)
    command = service_command(unit)
    expected = [str(python), "-m", "clawgate.gateway.cli", "gateway"]
    assert command in (expected, ["/usr/bin/env", *expected]), command
    assert service_env(unit) == {"CLAWGATE_HOME": str(home), "PYTHONUNBUFFERED": "1"}
    assert specifiers(unit["Service"]["WorkingDirectory"][0]) == str(home)
    assert specifiers(unit["Service"]["EnvironmentFile"][0]) == f"-{home}/gateway.env"
    # a user manager has no network-online.target: no ordering on it
    settings = [v for section in unit.values() for values in section.values() for v in values]
    assert not any("network-online" in v for v in settings) and "After" not in unit["Unit"] and "Wants" not in unit["Unit"]
    # the command really runs (through env(1) where the path needs it)
    ran = subprocess.run([*command[:-3], "-c", "import sys; print(sys.executable)"], capture_output=True, text=True,
                         timeout=60)
    assert ran.returncode == 0 and ran.stdout.strip() == str(python), ran.stderr
    # systemd's own reader, where the machine has it
    if shutil.which("systemd-analyze"):
        folder = tmp_path / "units"
        folder.mkdir()
        (folder / "clawgate.service").write_text(text, encoding="utf-8")
        verify = subprocess.run(["systemd-analyze", "verify", str(folder / "clawgate.service")],
                                capture_output=True, text=True, timeout=120)
        assert verify.returncode == 0 and "clawgate.service" not in verify.stdout + verify.stderr, verify.stderr


def test_a_home_systemd_cannot_hold_is_one_line(tmp_path: Path) -> None:
    proc = DaemonProcess(tmp_path / "home ", anthropic_url=None)  # a trailing space: systemd trims it
    out = cli(proc, "gateway", "install", "--print")
    assert out.returncode == 2 and out.stdout == "" and out.stderr.count("\n") == 1, out.stderr
    assert "cannot be written in a systemd unit" in out.stderr and "Traceback" not in out.stderr


def no_systemctl(tmp_path: Path) -> dict[str, str]:
    empty = tmp_path / "empty-bin"
    empty.mkdir(exist_ok=True)
    return {"PATH": str(empty), "XDG_CONFIG_HOME": str(tmp_path / "xdg")}


def test_print_shows_the_unit(tmp_path: Path) -> None:
    proc = DaemonProcess(tmp_path / "home", anthropic_url=None)
    out = cli(proc, "gateway", "install", "--print")
    assert out.returncode == 0, out.stderr
    unit = parse_unit(out.stdout)["Service"]
    assert service_command(read_unit(out.stdout)) == [sys.executable, "-m", "clawgate.gateway.cli", "gateway"]
    assert unit["Restart"] == "on-failure" and "5" in unit["RestartPreventExitStatus"].split()
    assert service_env(read_unit(out.stdout))["CLAWGATE_HOME"] == str(proc.home)
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
    unit = read_unit(cli(daemon, "gateway", "install", "--print").stdout)
    environment = outside_environment()
    environment.update(line.split("=", 1) for line in (daemon.home / "gateway.env").read_text().splitlines()
                       if "=" in line and not line.startswith("#"))
    environment["CLAWGATE_HOME"] = str(daemon.home)
    ran = subprocess.run(service_command(unit), env=environment, capture_output=True, text=True, timeout=60)
    assert ran.returncode == 5 and "already running" in ran.stderr
