"""A pytest process killed with SIGKILL (no fixture teardown runs) leaves no server behind: Synapse,
Dovecot, redis-server, the MCP server and the daemons the fixtures started die with it
(tests/lifeline.py). The same in a parallel run (pytest-xdist, `make test`): a killed worker takes its
servers along, and a killed controller takes its workers (execnet ends a worker whose controller is
gone) and so their servers."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

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
                "daemon": daemon.proc.pid, "pytest": os.getpid()}
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


@pytest.mark.parametrize("killed", ["pytest", "xdist controller", "xdist worker"])
def test_a_killed_pytest_leaves_no_server_running(tmp_path: Path, killed: str) -> None:
    (tmp_path / "test_inner.py").write_text(INNER)
    pids_file = tmp_path / "pids.json"
    parallel = ["-n", "1"] if killed.startswith("xdist") else ["-p", "no:xdist"]
    # this test may itself run in an xdist worker: the inner pytest is a run of its own
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_XDIST")}
    inner = subprocess.Popen([sys.executable, "-m", "pytest", str(tmp_path / "test_inner.py"), "-p", "no:cacheprovider",
                              *parallel, "-q", "--basetemp", str(tmp_path / "inner-tmp")],
                             cwd=ROOT, env={**env, "PIDS_FILE": str(pids_file)}, start_new_session=True,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    lifeline.hold(inner)
    try:
        wait_until(lambda: pids_file.exists() or inner.poll() is not None, "the inner pytest's servers up", timeout=300)
        assert pids_file.exists(), inner.communicate(timeout=30)[0].decode(errors="replace")[-3000:]
        pids = {name: pid for name, pid in json.loads(pids_file.read_text()).items() if pid}
        assert (pids["pytest"] == inner.pid) == (killed == "pytest"), (pids, inner.pid)  # the test ran where meant
        children = {p.pid for p in psutil.Process(inner.pid).children(recursive=True)}
        assert all(alive(pid) for pid in pids.values()), pids
        mcp = [pid for pid in children if "tests.fakes.mcp_server" in " ".join(psutil.Process(pid).cmdline())]
        assert len(mcp) == 1, children
        pids["mcp"] = mcp[0]
        if killed == "xdist worker":  # the worker that runs the test; the controller lives on
            os.kill(pids.pop("pytest"), signal.SIGKILL)
        else:  # pytest alone, or the xdist controller: no fixture gets a chance to stop anything
            inner.send_signal(signal.SIGKILL)
            inner.wait(30)
        # a worker whose controller is gone is ended by execnet within 15 s (SIGINT at 5 s, exit at 15 s)
        wait_until(lambda: not any(alive(pid) for pid in pids.values()),
                   f"every server the killed {killed} had started to be gone",
                   describe=lambda: ", ".join(f"{name} {pid}" for name, pid in pids.items() if alive(pid)))
    finally:
        if inner.poll() is None:
            inner.kill()
            inner.wait(30)
