"""`clawgate doctor`: every check, and each one failing, with no daemon running unless a test starts one."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections import namedtuple
from pathlib import Path
from typing import Any

import pytest

from clawgate.config.paths import Paths
from clawgate.gateway import doctor
from tests.fakes.anthropic_api import FakeAnthropic
from tests.harness import ROOT, DaemonProcess

Usage = namedtuple("Usage", "total used free")


@pytest.fixture
def home(tmp_path: Path, fake_model: FakeAnthropic) -> DaemonProcess:
    """An initialised home (not started), configured for the fake Messages API."""
    proc = DaemonProcess(tmp_path / "home", anthropic_url=fake_model.base_url)
    proc.init()
    return proc


def run_doctor(proc: DaemonProcess, *args: str, env: dict[str, str] | None = None) -> tuple[int, dict[str, dict[str, str]], str]:
    out = subprocess.run([sys.executable, "-m", "clawgate.gateway.cli", "doctor", "--json", *args],
                         env={**proc.env, **(env or {})}, cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.stderr == "", out.stderr
    report = json.loads(out.stdout)
    assert report["ok"] == (out.returncode == 0)
    return out.returncode, {c["name"]: c for c in report["checks"]}, out.stdout


def text_doctor(proc: DaemonProcess, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "clawgate.gateway.cli", "doctor", *args], env=proc.env, cwd=ROOT,
                          capture_output=True, text=True, timeout=60)


def test_a_healthy_home_passes_with_the_key_checked_against_the_api(home, fake_model: FakeAnthropic) -> None:
    code, checks, raw = run_doctor(home)
    assert code == 0, raw
    assert [c for c in checks] == ["config", "model", "token", "port", "workspace", "sandbox",
                                   "mounts", "exec path", "database", "disk", "channels"]  # no channel enabled: no channel line
    assert checks["model"]["status"] == "ok" and "key accepted" in checks["model"]["detail"]
    assert fake_model.requests == []  # count_tokens, not a paid message (test_rejected_key_fails proves the call)
    assert checks["port"]["status"] == "ok"
    out = text_doctor(home)
    assert out.returncode == 0 and len(out.stdout.splitlines()) == 11
    assert checks["channels"]["status"] == "ok" and "telegram" in checks["channels"]["detail"]
    assert all(line.split()[0] in ("ok", "WARN", "skip") for line in out.stdout.splitlines()), out.stdout


def test_offline_makes_no_call(home, fake_model: FakeAnthropic) -> None:
    fake_model.rejected_keys.add("test-key")
    code, checks, _ = run_doctor(home, "--offline")
    assert code == 0 and checks["model"]["status"] == "skip" and "--offline" in checks["model"]["detail"]


def test_invalid_config_fails_and_skips_what_needs_it(home) -> None:
    with open(home.home / "config.toml", "a") as fh:
        fh.write("\n[log]\nlevle = 'typo'\n")
    code, checks, _ = run_doctor(home)
    assert code == 1 and checks["config"]["status"] == "fail" and "levle" in checks["config"]["detail"]
    assert checks["model"]["status"] == "skip" and checks["disk"]["status"] == "ok"
    out = text_doctor(home)
    assert out.returncode == 1 and out.stdout.splitlines()[0].startswith("FAIL config") and "fix:" in out.stdout


def test_missing_key_fails(home) -> None:
    env = {k: v for k, v in home.env.items() if k != "ANTHROPIC_API_KEY"}
    home.env = env
    code, checks, _ = run_doctor(home)
    assert code == 1 and checks["model"]["status"] == "fail" and "ANTHROPIC_API_KEY" in checks["model"]["fix"]


def test_rejected_key_fails(home, fake_model: FakeAnthropic) -> None:
    fake_model.rejected_keys.add("test-key")
    code, checks, _ = run_doctor(home)
    assert code == 1 and checks["model"]["status"] == "fail" and "rejected" in checks["model"]["detail"]


def test_a_404_from_the_model_api_is_a_wrong_base_url_not_an_outage(home, fake_model: FakeAnthropic) -> None:
    code, checks, _ = run_doctor(home, env={"ANTHROPIC_BASE_URL": fake_model.base_url + "/anthropic"})
    assert code == 1 and checks["model"]["status"] == "fail", checks["model"]
    assert "HTTP 404" in checks["model"]["detail"] and "ANTHROPIC_BASE_URL" in checks["model"]["fix"]


def test_unreachable_model_api_fails(home) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = s.getsockname()[1]  # nothing listens once closed
    code, checks, _ = run_doctor(home, env={"ANTHROPIC_BASE_URL": f"http://127.0.0.1:{dead}"})
    assert code == 1 and checks["model"]["status"] == "fail" and "cannot reach" in checks["model"]["detail"]


def test_a_token_file_others_can_read_fails(tmp_path: Path, fake_model: FakeAnthropic) -> None:
    proc = DaemonProcess(tmp_path / "home", anthropic_url=fake_model.base_url, token=None)
    proc.init()
    token_file = proc.home / "state/gateway.token"
    token_file.parent.mkdir(parents=True, exist_ok=True)
    token_file.write_text("some-token\n")
    os.chmod(token_file, 0o644)
    code, checks, _ = run_doctor(proc)
    assert code == 1 and checks["token"]["status"] == "fail" and checks["token"]["fix"] == f"chmod 600 {token_file}"
    os.chmod(token_file, 0o600)
    assert run_doctor(proc)[1]["token"]["status"] == "ok"
    token_file.unlink()
    assert run_doctor(proc)[1]["token"]["status"] == "warn"  # generated at first start: not a failure


def test_port_taken_by_another_program_fails_and_ours_passes(home, daemon_factory) -> None:
    with socket.socket() as other:
        other.bind(("127.0.0.1", home.port))
        other.listen()
        code, checks, _ = run_doctor(home)
    assert code == 1 and checks["port"]["status"] == "fail" and "CLAWGATE_GATEWAY__PORT" in checks["port"]["fix"]
    # the program on the port is not asked for channel states (it would never answer a gateway hello)
    assert checks["channels"]["detail"].endswith("daemon not running"), checks["channels"]
    running = daemon_factory(home=home.home, init=False)
    code, checks, _ = run_doctor(running)
    assert code == 0 and "this home's gateway" in checks["port"]["detail"], checks["port"]
    assert checks["channels"]["detail"].endswith("enabled: none; daemon running"), checks["channels"]  # ours is asked


def test_workspace_that_is_not_a_folder_fails(home, tmp_path: Path) -> None:
    not_a_folder = tmp_path / "file.txt"
    not_a_folder.write_text("x")
    code, checks, _ = run_doctor(home, env={"CLAWGATE_AGENT__WORKSPACE": str(not_a_folder)})
    assert code == 1 and checks["workspace"]["status"] == "fail" and "not a folder" in checks["workspace"]["detail"]
    code, checks, _ = run_doctor(home, env={"CLAWGATE_AGENT__WORKSPACE": str(tmp_path / "missing")})
    assert code == 1 and "clawgate init" in checks["workspace"]["fix"]


def test_corrupt_database_fails_and_is_left_in_place(home) -> None:
    db = home.home / "state/clawgate.db"
    db.parent.mkdir(parents=True, exist_ok=True)
    db.write_bytes(b"this is not a database" * 100)
    code, checks, _ = run_doctor(home)
    assert code == 1 and checks["database"]["status"] == "fail" and "corrupt" in checks["database"]["detail"]
    assert "start the gateway once" in checks["database"]["fix"]
    assert db.read_bytes().startswith(b"this is not a database")


def _checks(home: DaemonProcess, **probes: Any) -> dict[str, doctor.Check]:
    env = {k: v for k, v in home.env.items()}
    return {c.name: c for c in doctor.run_checks(Paths(home.home), offline=True, environ=env, **probes)}


def test_sandbox_unavailable_fails_and_missing_module_is_skipped(home) -> None:
    def no_bwrap() -> dict[str, Any]:
        return {"available": False, "detail": "bubblewrap not found", "fix": "apt install bubblewrap"}

    checks = _checks(home, sandbox_status=no_bwrap)
    assert checks["sandbox"].status == "fail" and checks["sandbox"].fix == "apt install bubblewrap"
    assert doctor.exit_code(list(checks.values())) == 1
    assert _checks(home, sandbox_status=lambda: (True, "bubblewrap 0.8"))["sandbox"].status == "ok"
    assert _checks(home, sandbox_status=lambda: None)["sandbox"].status == "skip"


def test_missing_bubblewrap_warns_with_the_fix(home) -> None:
    from clawgate.agent.tools.mounts import MountStatus

    check = _checks(home, mount_status=lambda: MountStatus(False, "bubblewrap is not installed"))["mounts"]
    assert check.status == "warn" and "bubblewrap" in check.fix and "ask the owner" in check.detail
    assert _checks(home)["mounts"].status == "ok"  # this machine has it (`make test` installs it)


def test_low_disk_space_fails_then_warns(home) -> None:
    assert _checks(home, disk_usage=lambda p: Usage(10 ** 12, 10 ** 12, 50 * 1024 ** 2))["disk"].status == "fail"
    assert _checks(home, disk_usage=lambda p: Usage(10 ** 12, 10 ** 12, 500 * 1024 ** 2))["disk"].status == "warn"


def test_exec_path_names_the_version_managers_exec_may_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from clawgate.config.schema import Settings

    fake_home = tmp_path / "me"
    for folder in (".asdf/shims", ".nvm/versions/node/v20.1.0/bin", "bin"):
        (fake_home / folder).mkdir(parents=True)
    monkeypatch.setenv("HOME", str(fake_home))
    search = os.pathsep.join([str(fake_home / ".asdf/shims"), str(fake_home / ".nvm/versions/node/v20.1.0/bin"),
                              str(fake_home / "bin"), "/usr/bin"])
    check = doctor.check_exec_path(Settings(), {"PATH": search})
    assert check.status == "ok" and f"asdf ({fake_home / '.asdf'})" in check.detail, check
    assert f"nvm ({fake_home / '.nvm'})" in check.detail and str(fake_home / "bin") in check.detail
    assert "tools.exec.sandbox_read_paths" in check.fix
    off = Settings.model_validate({"tools": {"exec": {"sandbox": "off"}}})
    assert doctor.check_exec_path(off, {"PATH": search}).status == "skip"


def test_mail_without_authserv_id_says_from_can_be_forged(home) -> None:
    mail = {"CLAWGATE_CHANNELS__EMAIL__ADDRESS": "bot@example.test", "CLAWGATE_CHANNELS__EMAIL__IMAP_HOST": "127.0.0.1",
            "CLAWGATE_CHANNELS__EMAIL__PASSWORD": "pw"}
    code, checks, _ = run_doctor(home, "--offline", env=mail)
    warning = checks["email from"]
    assert warning["status"] == "warn" and "can be forged" in warning["detail"] and "approvals" in warning["detail"]
    assert "authserv_id" in warning["fix"]
    assert any("email from" in line and "can be forged" in line for line in text_doctor_env(home, mail).splitlines())
    _, checks, _ = run_doctor(home, "--offline", env={**mail, "CLAWGATE_CHANNELS__EMAIL__AUTHSERV_ID": "mx.example.test"})
    assert "email from" not in checks
    _, checks, _ = run_doctor(home, "--offline")
    assert "email from" not in checks  # no mail channel, nothing to say


def text_doctor_env(proc: DaemonProcess, env: dict[str, str]) -> str:
    return subprocess.run([sys.executable, "-m", "clawgate.gateway.cli", "doctor", "--offline"], env={**proc.env, **env},
                          cwd=ROOT, capture_output=True, text=True, timeout=60).stdout
