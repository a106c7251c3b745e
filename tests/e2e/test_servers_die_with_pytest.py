"""A pytest process killed with SIGKILL (no fixture teardown runs) leaves no server behind: Synapse,
Dovecot, redis-server, the MCP server and the daemons the fixtures started die with it
(tests/lifeline.py)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import psutil

from tests import lifeline
from tests.harness import ROOT
from tests.waiting import wait_until

INNER = '''
import json, os, time
from pathlib import Path

from tests.conftest import daemon, daemon_factory, fake_model  # noqa: F401
from tests.email_servers import dovecot  # noqa: F401
from tests.fleet_support import redis_server  # noqa: F401
from tests.mcp_support import http_server
from tests.servers.synapse import synapse  # noqa: F401


def test_servers_up_then_killed(synapse, dovecot, redis_server, daemon, tmp_path):
    with http_server(tmp_path, "token-0123456789") as url:
        pids = {"synapse": synapse.proc.pid, "dovecot": dovecot.proc.pid, "redis-server": redis_server.proc.pid,
                "daemon": daemon.proc.pid}
        out = Path(os.environ["PIDS_FILE"])
        out.with_suffix(".tmp").write_text(json.dumps(pids))
        out.with_suffix(".tmp").rename(out)
        time.sleep(3600)  # killed here, fixtures and all
'''


def alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def test_a_killed_pytest_leaves_no_server_running(tmp_path: Path) -> None:
    (tmp_path / "test_inner.py").write_text(INNER)
    pids_file = tmp_path / "pids.json"
    inner = subprocess.Popen([sys.executable, "-m", "pytest", str(tmp_path / "test_inner.py"), "-p", "no:cacheprovider",
                              "-q", "--basetemp", str(tmp_path / "inner-tmp")],
                             cwd=ROOT, env={**os.environ, "PIDS_FILE": str(pids_file)}, start_new_session=True,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    lifeline.hold(inner)
    try:
        wait_until(lambda: pids_file.exists() or inner.poll() is not None, "the inner pytest's servers up", timeout=300)
        assert pids_file.exists(), inner.communicate(timeout=30)[0].decode(errors="replace")[-3000:]
        pids = {name: pid for name, pid in json.loads(pids_file.read_text()).items() if pid}
        children = {p.pid for p in psutil.Process(inner.pid).children(recursive=True)}
        assert all(alive(pid) for pid in pids.values()), pids
        mcp = [pid for pid in children if "tests.fakes.mcp_server" in " ".join(psutil.Process(pid).cmdline())]
        assert len(mcp) == 1, children
        pids["mcp"] = mcp[0]
        inner.send_signal(signal.SIGKILL)  # pytest alone: its fixtures get no chance to stop anything
        inner.wait(30)
        wait_until(lambda: not any(alive(pid) for pid in pids.values()),
                   "every server the killed pytest had started to be gone",
                   describe=lambda: ", ".join(f"{name} {pid}" for name, pid in pids.items() if alive(pid)))
    finally:
        if inner.poll() is None:
            inner.kill()
            inner.wait(30)
