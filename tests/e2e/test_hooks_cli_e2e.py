"""`clawgate hooks list|add|remove|test` as a user runs them: config.toml edited in place, then a signed
test call through the real daemon's listener."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

from tests.fakes.anthropic_api import FakeAnthropic, last_user_text
from tests.harness import DaemonProcess, free_port
from tests.waiting import wait_until


def one_line_error(result) -> str:
    assert result.returncode != 0 and "Traceback" not in result.stderr, result.stderr
    assert result.stderr.count("\n") == 1, result.stderr
    return result.stderr


async def test_add_list_test_remove(daemon_factory, fake_model: FakeAnthropic, tmp_path: Path) -> None:
    home = tmp_path / "home"
    env = {"CLAWGATE_GATEWAY__HOOKS_PORT": str(free_port())}
    offline = DaemonProcess(home, anthropic_url=None, env=env)
    offline.init()
    config = home / "config.toml"
    before = config.read_text()
    added = offline.cli("hooks", "add", "ci", "--message", "CI says: {{ body.status }}", "--deliver", "none")
    assert added.returncode == 0, added.stderr
    token = added.stdout.split("Bearer <token>): ")[1].strip()
    assert len(token) >= 16 and "restart the gateway" in added.stdout
    signed = offline.cli("hooks", "add", "gh", "--hmac-secret", "a-signing-secret", "--id-header", "X-GitHub-Delivery")
    assert signed.returncode == 0, signed.stderr
    text = config.read_text()
    assert text.startswith(before.rstrip("\n")) and "[hooks.ci]" in text and "[hooks.gh]" in text  # comments kept
    assert stat.S_IMODE(os.stat(config).st_mode) == 0o600

    assert "already exists" in one_line_error(offline.cli("hooks", "add", "ci"))
    assert "does not parse" in one_line_error(offline.cli("hooks", "add", "bad", "--message", "{{ body.x "))
    assert "invalid delivery target" in one_line_error(offline.cli("hooks", "add", "bad", "--deliver", "fax:1"))
    assert "must be 1-64 letters" in one_line_error(offline.cli("hooks", "add", "a/b"))
    assert "[hooks.bad]" not in config.read_text()

    listed = json.loads(offline.cli("hooks", "list", "--json").stdout)
    assert [(h["name"], h["auth"], h["session"], h["deliver"]) for h in listed] == [
        ("ci", "bearer token", "hooks:ci", "none"), ("gh", "hmac (github, header X-Hub-Signature-256)", "hooks:gh", "none")]
    assert token not in json.dumps(listed) and "a-signing-secret" not in offline.cli("hooks", "list").stdout

    no_daemon = offline.cli("hooks", "test", "ci")
    assert no_daemon.returncode == 3 and "nothing listens at http://127.0.0.1:" in one_line_error(no_daemon)

    daemon = daemon_factory(env, home=home, init=False)
    body = tmp_path / "body.json"
    body.write_text(json.dumps({"status": "green"}))
    tested = daemon.cli("hooks", "test", "ci", "--body", str(body))
    assert tested.returncode == 0, tested.stderr
    assert "accepted the call as run hook:ci:body-" in tested.stdout and "history of hooks:ci" in tested.stdout
    wait_until(lambda: any("CI says: green" in last_user_text(r) for r in fake_model.requests), "the test call's run",
               describe=daemon.log_text)
    gh = daemon.cli("hooks", "test", "gh", "--json")
    assert gh.returncode == 0 and json.loads(gh.stdout)["id"].startswith("hook:gh:test-"), gh.stderr

    removed = daemon.cli("hooks", "remove", "gh")
    assert removed.returncode == 0 and "[hooks.gh]" not in config.read_text() and "[hooks.ci]" in config.read_text()
    stale = daemon.cli("hooks", "test", "gh")
    assert "no hook 'gh'" in one_line_error(stale)
    assert "no hook 'gh'" in one_line_error(daemon.cli("hooks", "remove", "gh"))
