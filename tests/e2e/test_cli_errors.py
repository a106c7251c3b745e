"""The `clawgate` CLI's failure paths, as real subprocesses against a real daemon (tests/harness.py)
or real foreign servers on loopback: one line on stderr, a documented exit code, never a traceback."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import socketserver
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Iterator

import pytest

from clawgate.agent.tasks.store import Step, Task, TaskStore
from tests.harness import ROOT, DaemonProcess, free_port

EXIT_FAILED, EXIT_NO_DAEMON, EXIT_UNREACHABLE, EXIT_ALREADY_RUNNING, EXIT_BROKEN_PIPE = 1, 3, 4, 5, 141


def one_line(result: subprocess.CompletedProcess[str], code: int) -> str:
    """The single stderr line of a failed command (and nothing on stdout)."""
    assert "Traceback" not in result.stderr, result.stderr
    assert result.returncode == code, (result.returncode, result.stderr)
    assert result.stderr.startswith("clawgate: ") and result.stderr.count("\n") == 1, result.stderr
    assert result.stdout == ""
    return result.stderr


def with_env(proc: DaemonProcess, **env: str) -> DaemonProcess:
    """The same home with other settings (a wrong token, another port), for running the CLI."""
    other = DaemonProcess(proc.home, anthropic_url=None)
    other.env = {**proc.env, **env}
    return other


def idle_home(tmp_path: Path) -> DaemonProcess:
    """An initialised home whose daemon is not running, its port held bound without listening for as long as
    the home object lives: connections are refused there, and no server of a test running beside this one
    can take the port (a free port picked and released could be, and a CLI would find "another program")."""
    proc = DaemonProcess(tmp_path / "idle", anthropic_url=None)
    held = socket.socket()
    held.bind(("127.0.0.1", 0))
    proc.port = held.getsockname()[1]
    proc.env["CLAWGATE_GATEWAY__PORT"] = str(proc.port)
    proc.held_port = held  # type: ignore[attr-defined]  # closed with the home object
    proc.init()
    return proc


def seed_task(home: Path, session: str = "main") -> Task:
    task = Task(goal="tidy the notes", session_key=session, status="in_progress",
                steps=[Step("list", "done", "listed 3 files"), Step("merge", "in_progress")])
    TaskStore(home / "state/tasks").save(task)
    return task


def snake_keys(value: Any) -> list[str]:
    """Keys with an underscore anywhere in a JSON document (a task's free-form context excepted)."""
    if isinstance(value, dict):
        return [k for k in value if "_" in k] + [s for k, v in value.items() if k != "context" for s in snake_keys(v)]
    if isinstance(value, list):
        return [s for v in value for s in snake_keys(v)]
    return []


# foreign servers on the gateway's port ------------------------------------------------------
class _Http200(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        self.request.recv(4096)
        self.request.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 7\r\n\r\ngarbage")


class _AcceptAndClose(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        pass  # returning closes the connection before any HTTP answer


@pytest.fixture(params=[_Http200, _AcceptAndClose], ids=["http-200", "accept-and-close"])
def foreign_port(request: pytest.FixtureRequest) -> Iterator[int]:
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), request.param)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


@pytest.fixture
def closing_websocket_port() -> Iterator[int]:
    """A WebSocket server that completes the handshake, then closes with an error."""
    from websockets.sync.server import serve

    server = serve(lambda ws: ws.close(1011, "internal error for the test"), "127.0.0.1", 0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.socket.getsockname()[1]
    server.shutdown()


# tests ----------------------------------------------------------------------------------------
async def test_wrong_token_is_one_line_exit_4(daemon: DaemonProcess) -> None:
    wrong = with_env(daemon, CLAWGATE_GATEWAY__TOKEN="not-the-token")
    for args in (("status",), ("tasks", "list"), ("cron", "list"), ("tasks", "cancel", "t_x")):
        line = one_line(await asyncio.to_thread(wrong.cli, *args), EXIT_UNREACHABLE)
        assert "refused the token" in line and "gateway.token" in line, (args, line)


async def test_a_foreign_server_on_the_port_is_one_line_exit_4(tmp_path: Path, foreign_port: int) -> None:
    cli = with_env(idle_home(tmp_path), CLAWGATE_GATEWAY__PORT=str(foreign_port))
    for args in (("status",), ("tasks", "list"), ("cron", "list")):
        line = one_line(await asyncio.to_thread(cli.cli, *args), EXIT_UNREACHABLE)
        assert "is not a clawgate gateway" in line and str(foreign_port) in line, (args, line)


async def test_a_websocket_server_that_drops_the_connection_is_one_line_exit_4(tmp_path: Path,
                                                                             closing_websocket_port: int) -> None:
    cli = with_env(idle_home(tmp_path), CLAWGATE_GATEWAY__PORT=str(closing_websocket_port))
    line = one_line(await asyncio.to_thread(cli.cli, "tasks", "list"), EXIT_UNREACHABLE)
    assert "closed the connection" in line and "internal error for the test" in line


async def test_without_a_daemon_status_is_exit_3_and_tasks_fall_back_to_the_files(tmp_path: Path) -> None:
    proc = idle_home(tmp_path)
    task = seed_task(proc.home)
    line = one_line(await asyncio.to_thread(proc.cli, "status"), EXIT_NO_DAEMON)
    assert "no gateway is running" in line and "clawgate gateway" in line
    listed = await asyncio.to_thread(proc.cli, "tasks", "list")
    assert listed.returncode == 0 and task.id in listed.stdout, listed.stderr
    shown = await asyncio.to_thread(proc.cli, "tasks", "show", task.id)
    document = json.loads(shown.stdout)
    assert document["sessionKey"] == "main" and "updatedAt" in document and snake_keys(document) == []
    missing = one_line(await asyncio.to_thread(proc.cli, "tasks", "cancel", "t_missing"), EXIT_FAILED)
    assert "no task 't_missing'" in missing


async def test_offline_commands_on_a_corrupt_state_database_are_one_line_and_leave_it_alone(tmp_path: Path) -> None:
    proc = idle_home(tmp_path)
    database = proc.home / "state/clawgate.db"
    database.parent.mkdir(parents=True, exist_ok=True)
    damaged = b"SQLite format 3\x00" + os.urandom(8192)  # a header, then garbage
    database.write_bytes(damaged)
    for command in (["cron", "list"], ["pairing", "list"], ["usage"]):
        line = one_line(await asyncio.to_thread(proc.cli, *command), EXIT_FAILED)
        assert "clawgate.db" in line and ("corrupt" in line or "not a database" in line), (command, line)
        assert "start the gateway once" in line, line  # the fix: the daemon sets it aside
    assert database.read_bytes() == damaged and not list(database.parent.glob("clawgate.db.corrupt-*"))


async def test_a_stale_pid_file_or_lock_file_does_not_block_offline_edits(tmp_path: Path) -> None:
    proc = idle_home(tmp_path)
    # a live process that looks like a gateway, named by both files, but holding no lock
    decoy = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)", "gateway"])
    try:
        (proc.home / "state/gateway.pid").write_text(str(decoy.pid))
        (proc.home / "state/daemon.lock").write_text(f"{decoy.pid} gateway\n")
        added = await asyncio.to_thread(proc.cli, "cron", "add", "--every", "1h", "-m", "x", "--json")
        assert added.returncode == 0, added.stderr
        assert snake_keys(json.loads(added.stdout)) == []
        listed = await asyncio.to_thread(proc.cli, "tasks", "list")
        assert listed.returncode == 0 and listed.stdout.strip() == "no active tasks", listed.stderr
        status = one_line(await asyncio.to_thread(proc.cli, "status"), EXIT_NO_DAEMON)
        assert str(decoy.pid) not in status
    finally:
        decoy.kill()
        decoy.wait()


async def test_status_json_into_a_closed_pipe_exits_quietly(daemon: DaemonProcess) -> None:
    def run_into_closed_pipe() -> tuple[int, str]:
        read_end, write_end = os.pipe()
        os.close(read_end)  # the reader is gone before we write: every write is EPIPE
        try:
            child = subprocess.run([sys.executable, "-m", "clawgate.gateway.cli", "status", "--json"], env=daemon.env, cwd=ROOT,
                                   stdout=write_end, stderr=subprocess.PIPE, text=True, timeout=60)
        finally:
            os.close(write_end)
        return child.returncode, child.stderr

    code, stderr = await asyncio.to_thread(run_into_closed_pipe)
    assert (code, stderr) == (EXIT_BROKEN_PIPE, "")
    piped = await asyncio.to_thread(
        subprocess.run, ["sh", "-c", f"'{sys.executable}' -m clawgate.gateway.cli status --json | head -c 10"],
        env=daemon.env, cwd=ROOT, capture_output=True, text=True, timeout=60)
    whole = (await asyncio.to_thread(daemon.cli, "status", "--json")).stdout
    assert piped.stdout == whole[:10] and piped.stderr == "", piped.stderr
    status = json.loads(whole)
    assert status["queues"].keys() == {"inboxOpen", "outboxPending"} and snake_keys(status) == []


async def test_a_second_gateway_on_the_same_home_names_the_first_and_leaves_it_alone(daemon: DaemonProcess) -> None:
    assert daemon.proc is not None
    first = daemon.proc.pid
    pid_file = daemon.home / "state/gateway.pid"
    assert pid_file.read_text().strip() == str(first)
    other_port = free_port()  # another port, so only the instance lock can stop it
    second = with_env(daemon, CLAWGATE_GATEWAY__PORT=str(other_port))
    line = one_line(await asyncio.to_thread(second.cli, "gateway"), EXIT_ALREADY_RUNNING)
    assert f"pid {first}" in line and "already running" in line
    with socket.socket() as probe:  # it stopped before binding its port
        probe.bind(("127.0.0.1", other_port))
    assert daemon.alive() and pid_file.read_text().strip() == str(first)
    status = await asyncio.to_thread(daemon.cli, "status", "--json")
    assert status.returncode == 0 and json.loads(status.stdout)["pid"] == first


async def test_a_daemon_waits_for_an_offline_edit_holding_the_lock(daemon_factory: Any, tmp_path: Path) -> None:
    from clawgate.config.paths import Paths
    from clawgate.gateway.instance import CLI, InstanceLock

    home = tmp_path / "waiting"
    DaemonProcess(home, anthropic_url=None).init()
    lock = InstanceLock(Paths(home)).acquire(CLI, wait=0)
    released_at: list[float] = []

    def release() -> None:
        released_at.append(time.monotonic())
        lock.release()

    timer = threading.Timer(1.0, release)
    timer.start()
    try:
        proc = await asyncio.to_thread(daemon_factory, home=home, init=False)
    finally:
        timer.join()
    assert released_at and proc.alive()
    assert (home / "state/gateway.pid").read_text().strip() == str(proc.proc.pid)


async def test_tasks_cancel_goes_through_the_running_daemon(daemon_factory: Any, tmp_path: Path) -> None:
    home = tmp_path / "h"
    DaemonProcess(home, anthropic_url=None).init()
    task, kept = seed_task(home), seed_task(home, "other")
    daemon = daemon_factory(home=home, init=False)  # loads both tasks into its memory
    # a daemon it cannot talk to (another port) is not edited behind its back
    blind = with_env(daemon, CLAWGATE_GATEWAY__PORT=str(free_port()))
    line = one_line(await asyncio.to_thread(blind.cli, "tasks", "cancel", kept.id), EXIT_UNREACHABLE)
    assert f"pid {daemon.proc.pid}" in line and "not answering" in line
    assert TaskStore(home / "state/tasks").get(kept.id).status == "in_progress"

    async with daemon.client(subscribe="*") as client:
        out = await asyncio.to_thread(daemon.cli, "tasks", "cancel", task.id)
        assert out.returncode == 0 and f"cancelled {task.id}" in out.stdout, out.stderr
        event = await asyncio.wait_for(_next_task_event(client), 15)  # only the daemon emits this
        assert (event["id"], event["status"]) == (task.id, "cancelled")
        view = (await client.request("tasks.get", {"id": task.id}))["task"]
    on_disk = TaskStore(home / "state/tasks").get(task.id)
    assert view["status"] == on_disk.status == "cancelled" and view["updated_at"] == on_disk.updated_at
    again = one_line(await asyncio.to_thread(daemon.cli, "tasks", "cancel", task.id), EXIT_FAILED)
    assert "already cancelled" in again


async def _next_task_event(client: Any) -> dict[str, Any]:
    async for frame in client.events():
        if frame["event"] == "task":
            return frame["payload"]
    raise AssertionError("the gateway closed the connection")
