"""A daemon forked from the suite's zygote (tests/zygote.py) is the process an exec'd one is: its own
session, the test's environment and folder, its output on the test's pipe, and the same exit codes."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import pytest

from tests.fakes.anthropic_api import FakeAnthropic
from tests.harness import ROOT, DaemonProcess
from tests.zygote import ForkedDaemon, _extra_path


def _started(tmp_path: Path, fake_model: FakeAnthropic, name: str, monkeypatch: pytest.MonkeyPatch,
             *, exec_it: bool) -> DaemonProcess:
    if exec_it:
        monkeypatch.setenv("CLAWGATE_TEST_EXEC_DAEMONS", "1")
    else:
        monkeypatch.delenv("CLAWGATE_TEST_EXEC_DAEMONS", raising=False)
    daemon = DaemonProcess(tmp_path / name, anthropic_url=fake_model.base_url)
    daemon.init()
    return daemon.start()


def _facts(daemon: DaemonProcess) -> dict[str, object]:
    """What the test can see of the process (its environment shows in how it behaves: the port, token and
    home the test gave it; /proc/<pid>/environ shows only what a process was exec'd with)."""
    assert daemon.proc is not None
    pid = daemon.proc.pid
    return {"own session": os.getsid(pid) == pid and os.getpgid(pid) == pid,
            "folder": os.readlink(f"/proc/{pid}/cwd"),
            "ready line": any("gateway ready" in line for line in daemon.output)}


@pytest.mark.parametrize("stop", ["SIGTERM", "SIGKILL"])
async def test_a_forked_daemon_is_the_process_an_execd_one_is(tmp_path: Path, fake_model: FakeAnthropic,
                                                               monkeypatch: pytest.MonkeyPatch, stop: str) -> None:
    forked = _started(tmp_path, fake_model, "forked", monkeypatch, exec_it=False)
    execd = _started(tmp_path, fake_model, "execd", monkeypatch, exec_it=True)
    try:
        assert isinstance(forked.proc, ForkedDaemon) and isinstance(execd.proc, subprocess.Popen)
        for daemon, name in ((forked, "forked"), (execd, "execd")):
            assert _facts(daemon) == {"own session": True, "folder": str(ROOT), "ready line": True}
            async with daemon.client(events=["chat"]) as client:  # the port and token of its environment
                assert (await client.chat("hello", session="s"))["text"] == "echo: hello"
            assert list((tmp_path / name).rglob("*.jsonl"))  # its home: the environment's CLAWGATE_HOME
        codes = []
        for daemon in (forked, execd):
            assert daemon.proc is not None
            daemon.proc.send_signal(getattr(signal, stop))
            codes.append(daemon.proc.wait(30))
        assert codes[0] == codes[1] == (0 if stop == "SIGTERM" else -signal.SIGKILL)
    finally:
        forked.kill()
        execd.kill()


def test_what_a_fresh_interpreter_would_see_differently_is_execd(tmp_path: Path) -> None:
    """The child's choice (`_extra_path`, run here against this process's environment and modules as the
    zygote runs it against its own): run from the imports, with a test's PYTHONPATH folder put first, or exec."""
    own = dict(os.environ)
    path = [p for p in own.get("PYTHONPATH", "").split(os.pathsep) if p]

    def choice(env: dict[str, str], cwd: Path = Path.cwd()) -> list[str] | None:
        return _extra_path({"env": env, "cwd": str(cwd)})

    def with_folder(name: str, files: dict[str, str]) -> dict[str, str]:
        folder = tmp_path / name
        folder.mkdir()
        for file, text in files.items():
            (folder / file).parent.mkdir(parents=True, exist_ok=True)
            (folder / file).write_text(text)
        return {**own, "PYTHONPATH": os.pathsep.join([*path, str(folder)])}

    assert choice(own) == []
    assert choice(with_folder("plugin", {"a_test_plugin/__init__.py": ""})) == [str(tmp_path / "plugin")]
    assert choice({**own, "PYTHONPROFILEIMPORTTIME": "1"}) is None
    assert choice(own, tmp_path) is None  # another working folder: another sys.path[0]
    assert choice(with_folder("site", {"sitecustomize.py": "print('at start')"})) is None
    assert choice(with_folder("shadow", {"json.py": "x = 1"})) is None  # `json` here was imported from the stdlib


def test_a_forked_command_line_answers_as_an_execd_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Output, errors and exit codes of `DaemonProcess.cli`, forked and exec'd: a help text, a usage error,
    a command's one-line error, and a command that reads the home."""
    daemon = DaemonProcess(tmp_path / "home", anthropic_url=None)
    daemon.init()
    commands = [["--help"], ["no-such-command"], ["cron", "add", "--cron", "61 * * * *", "--message", "m"],
                ["cron", "list"]]
    answers = {}
    for how in ("forked", "execd"):
        if how == "execd":
            monkeypatch.setenv("CLAWGATE_TEST_EXEC_DAEMONS", "1")
        answers[how] = [(r.returncode, r.stdout, r.stderr) for r in (daemon.cli(*command) for command in commands)]
    assert answers["forked"] == answers["execd"]
    (help_code, help_text, _), (usage_code, _, usage), (cron_code, _, cron_error), (list_code, _, _) = answers["forked"]
    assert help_code == 0 and "usage:" in help_text
    assert usage_code != 0 and "no-such-command" in usage
    assert cron_code != 0 and "61" in cron_error and len(cron_error.strip().splitlines()) == 1
    assert list_code == 0
