"""A real Synapse homeserver (PyPI `matrix-synapse`) on a loopback port, for the Matrix tests.

Why a real server: the Matrix adapter is tested against the homeserver people actually run, not a
fake written here. One Synapse is started per test session (its start-up is the slow part), with
SQLite and a config generated into a temp dir: no federation, presence off, rate limits relaxed so
a burst of messages is never throttled. Users are registered through the shared-secret admin API
(`/_synapse/admin/v1/register`), each test with fresh names, so tests never see each other's rooms.
"""

from __future__ import annotations

import atexit
import hashlib
import hmac
import itertools
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from tests import lifeline
from tests.harness import free_port
from tests.waiting import wait_until

SERVER_NAME = "clawgate.test"
MISSING = "matrix-synapse is not installed in this venv: run `make setup` (the test extra installs PyPI matrix-synapse)"

_RELAXED = {"per_second": 10000, "burst_count": 10000}
_names = itertools.count(1)


@dataclass(frozen=True)
class MatrixUser:
    """A registered account: what a client needs to act as it."""

    user_id: str
    localpart: str
    password: str
    access_token: str
    device_id: str


def _config(root: Path, port: int, secret: str) -> dict:
    """The homeserver.yaml: loopback only, SQLite, nothing that reaches another server."""
    return {
        "server_name": SERVER_NAME,
        "public_baseurl": f"http://127.0.0.1:{port}/",
        "pid_file": str(root / "homeserver.pid"),
        "listeners": [{
            "port": port, "bind_addresses": ["127.0.0.1"], "type": "http", "tls": False,
            "x_forwarded": False, "resources": [{"names": ["client"], "compress": False}],
        }],
        "database": {"name": "sqlite3", "args": {"database": str(root / "homeserver.db")}},
        "log_config": str(root / "log.yaml"),
        "media_store_path": str(root / "media"),
        "signing_key_path": str(root / "signing.key"),
        "registration_shared_secret": secret,
        "macaroon_secret_key": secrets.token_hex(16),
        "form_secret": secrets.token_hex(16),
        "report_stats": False,
        "enable_registration": False,
        "trusted_key_servers": [],
        "suppress_key_server_warning": True,
        "federation_domain_whitelist": [],
        "presence": {"enabled": False},
        "url_preview_enabled": False,
        "enable_metrics": False,
        "max_upload_size": "10M",
        "bcrypt_rounds": 4,  # password hashing at its cheapest: every registration and login hashes once
        "rc_message": _RELAXED,
        "rc_registration": _RELAXED,
        "rc_login": {"address": _RELAXED, "account": _RELAXED, "failed_attempts": _RELAXED},
        "rc_joins": {"local": _RELAXED, "remote": _RELAXED},
        "rc_joins_per_room": _RELAXED,
        "rc_invites": {"per_room": _RELAXED, "per_user": _RELAXED, "per_issuer": _RELAXED},
        "rc_room_creation": _RELAXED,
        "rc_media_create": _RELAXED,
        "rc_admin_redaction": _RELAXED,
        "rc_key_requests": _RELAXED,
        "rc_profile": _RELAXED,
    }


_LOG_CONFIG = {
    "version": 1,
    "formatters": {"plain": {"format": "%(asctime)s %(name)s %(levelname)s %(message)s"}},
    "handlers": {"file": {"class": "logging.FileHandler", "formatter": "plain", "filename": None}},
    "root": {"level": "WARNING", "handlers": ["file"]},
    "disable_existing_loggers": False,
}


class Synapse:
    """One running homeserver; `register()` makes accounts, `stop()` ends it."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.secret = secrets.token_hex(16)
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_path = root / "homeserver.log"

    def start(self) -> "Synapse":
        """Write the config and a signing key, start the server, wait until the client API answers."""
        try:
            from signedjson.key import generate_signing_key, write_signing_keys
            import synapse  # noqa: F401  (only to fail with MISSING before a process is started)
        except ImportError as exc:
            raise RuntimeError(MISSING) from exc
        self.root.mkdir(parents=True, exist_ok=True)
        (self.root / "media").mkdir(exist_ok=True)
        with open(self.root / "signing.key", "w") as fh:
            write_signing_keys(fh, [generate_signing_key("a_clawgate")])
        log_config = json.loads(json.dumps(_LOG_CONFIG))
        log_config["handlers"]["file"]["filename"] = str(self.log_path)
        (self.root / "log.yaml").write_text(yaml.safe_dump(log_config))
        config = self.root / "homeserver.yaml"
        config.write_text(yaml.safe_dump(_config(self.root, self.port, self.secret)))
        out = open(self.root / "stdout.log", "wb")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "synapse.app.homeserver", "--config-path", str(config)],
            cwd=self.root, stdout=out, stderr=subprocess.STDOUT,
            env={**os.environ, "SYNAPSE_ASYNC_IO_REACTOR": "0"}, start_new_session=True)
        lifeline.hold(self.proc)  # dies with pytest, even a SIGKILLed one
        out.close()
        wait_until(self._answers, "Synapse's /_matrix/client/versions to answer", timeout=180,
                   interval=0.2, describe=self.describe)
        return self

    def _answers(self) -> bool:
        if self.proc is not None and self.proc.poll() is not None:
            raise AssertionError(f"Synapse exited with {self.proc.returncode} during start-up\n{self.describe()}")
        try:
            with urllib.request.urlopen(f"{self.base_url}/_matrix/client/versions", timeout=5) as resp:
                return resp.status == 200
        except (OSError, urllib.error.URLError):
            return False

    def describe(self) -> str:
        """The tail of Synapse's own output and log, for a failure message."""
        parts = []
        for path in (self.root / "stdout.log", self.log_path):
            if path.exists():
                parts.append(f"--- {path.name}\n" + path.read_text(errors="replace")[-3000:])
        return "\n".join(parts)

    def _call(self, method: str, path: str, body: dict | None = None, token: str | None = None) -> dict:
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(f"{self.base_url}{path}", data=data, method=method)
        req.add_header("Content-Type", "application/json")
        if token:
            req.add_header("Authorization", f"Bearer {token}")
        try:
            with urllib.request.urlopen(req, timeout=60) as resp:
                return json.loads(resp.read() or b"{}")
        except urllib.error.HTTPError as exc:
            raise AssertionError(f"Synapse {method} {path}: {exc.code} {exc.read()[:500]!r}") from exc

    def register(self, prefix: str = "user", *, admin: bool = False, displayname: str | None = None) -> MatrixUser:
        """A fresh account through the shared-secret admin API (the HMAC over nonce, name, password, admin)."""
        localpart = f"{prefix}{next(_names)}_{secrets.token_hex(3)}"
        password = secrets.token_urlsafe(12)
        nonce = self._call("GET", "/_synapse/admin/v1/register")["nonce"]
        digest = hmac.new(self.secret.encode(), b"\x00".join(
            p.encode() for p in (nonce, localpart, password, "admin" if admin else "notadmin")), hashlib.sha1)
        body = {"nonce": nonce, "username": localpart, "password": password, "admin": admin,
                "mac": digest.hexdigest()}
        if displayname:
            body["displayname"] = displayname
        got = self._call("POST", "/_synapse/admin/v1/register", body)
        return MatrixUser(got["user_id"], localpart, password, got["access_token"], got["device_id"])

    def stop(self) -> None:
        """SIGTERM, then SIGKILL if it lingers: the session's last step."""
        if self.proc is None or self.proc.poll() is not None:
            return
        os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=20)


def start_synapse(root: Path) -> Synapse:
    """Start one Synapse under `root`; stops it again if start-up fails half way."""
    server = Synapse(root)
    try:
        return server.start()
    except BaseException:
        server.stop()
        raise


_shared: Synapse | None = None


def shared_synapse() -> Synapse:
    """The test session's one Synapse, started on first use (a fixture or a conformance harness) and
    stopped when the session's process ends. Fails the asking test with one line when it is not installed."""
    global _shared
    try:
        import synapse as _synapse_package  # noqa: F401
    except ImportError:
        pytest.fail(MISSING, pytrace=False)
    if _shared is None or (_shared.proc is not None and _shared.proc.poll() is not None):
        _shared = start_synapse(Path(tempfile.mkdtemp(prefix="clawgate-synapse-")))
        atexit.register(_shared.stop)
        atexit.register(shutil.rmtree, _shared.root, True)
    return _shared


@pytest.fixture(scope="session")
def synapse() -> Synapse:
    """One real Synapse for the whole test session (start-up is paid once)."""
    return shared_synapse()
