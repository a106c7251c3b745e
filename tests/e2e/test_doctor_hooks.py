"""`clawgate doctor` on `[hooks.<name>]` tables: a line for the listener, then one per hook."""

from __future__ import annotations

import socket

from tests.e2e.test_doctor import home, run_doctor  # noqa: F401  (fixture)
from tests.harness import DaemonProcess, free_port
from tests.hooks_support import SECRET, TOKEN

TABLES = f'''
[hooks.ci]
token = "{TOKEN}"
message = "CI says: {{{{ body.status }}}}"

[hooks.gh]
hmac_secret = "{SECRET}"
deliver = "telegram:123456"

[hooks.fax]
token = "{TOKEN}"
deliver = "fax:1"

[hooks.old]
token = "{TOKEN}"
enabled = false
'''


def test_each_hook_is_checked_and_a_taken_listener_port_fails(home: DaemonProcess) -> None:
    with open(home.home / "config.toml", "a") as fh:
        fh.write(TABLES)
    port = free_port()
    code, checks, raw = run_doctor(home, "--offline", env={"CLAWGATE_GATEWAY__HOOKS_PORT": str(port)})
    assert code == 1, raw  # the hook the gateway would refuse to start with
    assert checks["hooks listener"]["status"] == "ok" and f"127.0.0.1:{port} is free" in checks["hooks listener"]["detail"]
    ci, gh, fax, old = (checks[f"hook {name}"] for name in ("ci", "gh", "fax", "old"))
    assert ci["status"] == "ok" and ci["detail"] == "POST /hooks/ci: bearer token; runs in hooks:ci; answers to the history only"
    assert gh["status"] == "warn" and "HMAC (github, X-Hub-Signature-256)" in gh["detail"]
    assert "telegram channel is not enabled" in gh["detail"]
    assert fax["status"] == "fail" and fax["detail"].startswith("hooks.fax.deliver: invalid delivery target 'fax:1'")
    assert old["status"] == "skip"
    assert TOKEN not in raw and SECRET not in raw

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        busy = taken.getsockname()[1]
        _, checks, _ = run_doctor(home, "--offline", env={"CLAWGATE_GATEWAY__HOOKS_PORT": str(busy),
                                                          "CLAWGATE_GATEWAY__HOOKS_HOST": "127.0.0.1"})
    listener = checks["hooks listener"]
    assert listener["status"] == "fail" and "in use by another program" in listener["detail"]
    assert "hooks_port" in listener["fix"]
    _, checks, _ = run_doctor(home, "--offline", env={"CLAWGATE_GATEWAY__HOOKS_PORT": str(port),
                                                      "CLAWGATE_GATEWAY__HOOKS_HOST": "0.0.0.0"})
    assert checks["hooks listener"]["status"] == "warn" and "reverse proxy with TLS" in checks["hooks listener"]["fix"]


def test_no_hooks_no_lines(home: DaemonProcess) -> None:
    _, checks, _ = run_doctor(home, "--offline")
    assert not [name for name in checks if name.startswith("hook")]
