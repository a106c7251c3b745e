"""Robustness of state and input, end to end through the real daemon (docs/security.md):
session keys checked where they enter, malformed session records skipped, idempotency ids that
cannot collide, a cap on connections that have not authenticated, user-only files."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import stat
from pathlib import Path

import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import InvalidStatus

from clawgate.gateway.client import GatewayError
from tests.fakes.anthropic_api import text, tool_use
from tests.harness import TOKEN, DaemonProcess
from tests.waiting import wait_until_async

LONG_NON_ASCII = "é" * 200  # 200 characters, but a 1,206-byte file name


async def test_an_unusable_session_key_gets_a_clear_error_and_the_daemon_keeps_serving(daemon, fake_model):
    async with daemon.client() as client:
        for method, params in [("chat.send", {"text": "hi"}), ("chat.history", {}), ("sessions.reset", {}),
                               ("chat.stop", {})]:
            for bad, says in [(LONG_NON_ASCII, "the limit is 230 bytes"), ("x" * 201, "the limit is 200"),
                              ("tab\there", "U+0009"), ("", "empty")]:
                with pytest.raises(GatewayError) as info:
                    await client.request(method, {**params, "session": bad})
                assert info.value.code == "invalid_params", (method, bad)
                assert says in info.value.message and f"{method}: session:" in info.value.message
                assert "\n" not in info.value.message
        fake_model.enqueue(text("still here"))
        final = await client.chat("are you there?", session="ok")
    assert final["state"] == "final" and final["text"] == "still here"
    assert daemon.alive() and len(fake_model.requests) == 1
    assert not any(LONG_NON_ASCII[:20] in p.name for p in (daemon.home / "state/sessions").iterdir())


async def test_idempotency_ids_of_different_sessions_never_collide(daemon, fake_model):
    """`x:y` + key `z` and `x` + key `y:z` are two messages; a retry of either is one."""
    async with daemon.client() as client:
        first = await client.request("chat.send", {"session": "x:y", "text": "one", "idempotencyKey": "z"})
        second = await client.request("chat.send", {"session": "x", "text": "two", "idempotencyKey": "y:z"})
        retry = await client.request("chat.send", {"session": "x:y", "text": "one", "idempotencyKey": "z"})
    assert first["status"] == second["status"] == "accepted" and first["runId"] != second["runId"]
    assert (retry["runId"], retry["status"]) == (first["runId"], "duplicate")


async def test_a_record_of_the_wrong_shape_does_not_silence_a_session(daemon: DaemonProcess, fake_model):
    fake_model.enqueue(text("first answer"))
    async with daemon.client() as client:
        assert (await client.chat("remember this", session="shaky"))["text"] == "first answer"
    assert daemon.terminate() == 0
    log = daemon.home / "state/sessions/shaky.jsonl"
    with log.open("a") as fh:
        fh.write('[]\n{"kind": "user"}\n{"kind": 5}\n{"kind": "assistant", "content": "x"}\n{"seq": "a", "kind": "user"}\n')
    daemon.output.clear()
    daemon.start()
    fake_model.enqueue(text("second answer"))
    async with daemon.client() as client:
        final = await client.chat("still there?", session="shaky")
    assert final["state"] == "final" and final["text"] == "second answer"
    # the conversation before the bad lines is kept and sent
    history = [b.get("text") for m in fake_model.requests[-1]["messages"] for b in m["content"] if b.get("type") == "text"]
    assert "first answer" in history and history[-1] == "still there?"
    skipped = [line for line in daemon.output if "skipped 5 unreadable record(s)" in line]
    assert len(skipped) == 1 and "shaky" in skipped[0]


def _read_all(sock: socket.socket) -> bytes:
    data = b""
    while chunk := sock.recv(4096):
        data += chunk
    return data


async def test_connections_that_never_authenticate_are_capped(daemon_factory, fake_model):
    daemon = daemon_factory({"CLAWGATE_GATEWAY__MAX_UNAUTHENTICATED": "4"})
    # two raw sockets that never send a byte, two WebSockets that never send `connect`
    idle_tcp = [socket.create_connection(("127.0.0.1", daemon.port), timeout=10) for _ in range(2)]
    idle_ws = [await connect(daemon.url, open_timeout=10) for _ in range(2)]
    try:
        extra = socket.create_connection(("127.0.0.1", daemon.port), timeout=10)
        with extra:
            answer = _read_all(extra)  # closed at once: EOF comes without sending anything
        assert answer.startswith(b"HTTP/1.1 503") and b"too many connections waiting to authenticate" in answer
        with pytest.raises(InvalidStatus) as info:
            async with daemon.client():
                pass
        assert info.value.response.status_code == 503
        status = await asyncio.to_thread(daemon.cli, "status")
        assert status.returncode == 4 and "Traceback" not in status.stderr  # cannot talk to the gateway
        assert "refused the connection: too many connections waiting to authenticate (at most 4" in status.stderr
    finally:
        for sock in idle_tcp:
            sock.close()
        for ws in idle_ws:
            await ws.close()

    async def serves() -> bool:
        try:
            async with daemon.client() as client:
                return bool(await client.request("status"))
        except InvalidStatus:
            return False

    await wait_until_async(serves, "the daemon to serve again", interval=0.05)
    # authenticated connections do not count: many at once are fine
    clients = [daemon.client() for _ in range(6)]
    opened = [await c.__aenter__() for c in clients]
    try:
        assert all([(await c.request("status"))["pid"] for c in opened])
    finally:
        for c in clients:
            await c.__aexit__(None, None, None)
    refusals = [line for line in daemon.output if "refused a connection" in line]
    assert 1 <= len(refusals) <= 2 and daemon.alive()  # logged once, not once per socket
    assert "Traceback" not in daemon.log_text()  # a refusal is no error (on either event loop)


async def test_every_state_file_is_user_only(daemon_factory, fake_model):
    """After a chat with tool calls (task, file write, memory, read-back of a secret), nothing under
    $CLAWGATE_HOME is readable by group or others, and the gateway token appears in no state file."""
    before = os.umask(0o022)  # the usual umask (inherited by the daemon): it must not depend on a strict one
    try:
        daemon = daemon_factory()
    finally:
        os.umask(before)
    fake_model.enqueue(
        tool_use("task", {"action": "plan", "goal": "keep notes", "steps": ["write", "read"]}),
        tool_use("write_file", {"path": "notes/secret.txt", "content": f"token={TOKEN}"}),
        tool_use("memory_append", {"text": "the user likes notes", "daily": True}),
        tool_use("read_file", {"path": "notes/secret.txt"}),
        text("done"),
    )
    async with daemon.client() as client:
        assert (await client.chat("take notes", session="files"))["text"] == "done"
    state = daemon.home / "state"
    expected = ["clawgate.db", "clawgate.db-wal", "clawgate.db-shm", "gateway.pid", "audit.jsonl", "written.json",
                "sessions/files.jsonl", "traces/files.jsonl"]
    for name in expected:
        assert (state / name).exists(), name
    assert list((state / "tasks").glob("*.json")), "the task file"
    assert list((daemon.workspace / "memory").glob("*.md")), "the daily memory log"
    loose = _group_or_other_accessible(daemon.home)
    assert loose == [], loose
    leaks = [p for p in state.rglob("*") if p.is_file() and TOKEN.encode() in p.read_bytes()]
    assert leaks == []
    session_log = (state / "sessions/files.jsonl").read_text()
    assert "tes…***" in session_log  # masked where it was written, read back and answered
    assert (daemon.workspace / "notes/secret.txt").read_text() == f"token={TOKEN}"  # the file itself is the user's


def _group_or_other_accessible(home: Path) -> list[str]:
    loose = []
    for path in [home, *home.rglob("*")]:
        mode = stat.S_IMODE(path.lstat().st_mode)
        if path.is_symlink():
            continue
        if path.is_dir() and mode != 0o700 or not path.is_dir() and mode & 0o077:
            loose.append(f"{path.relative_to(home)} {oct(mode)}")
    return loose


def test_history_of_a_known_session_still_reads_after_bad_lines(daemon: DaemonProcess, fake_model) -> None:
    """chat.history projects the same log: bad lines are skipped there as well (CLI, not the loop)."""
    fake_model.enqueue(text("hello back"))

    async def talk() -> None:
        async with daemon.client() as client:
            await client.chat("hello", session="hist")

    asyncio.run(talk())
    daemon.terminate()
    with (daemon.home / "state/sessions/hist.jsonl").open("a") as fh:
        fh.write('{"kind": "user", "text": "x", "ts": "noon"}\n' + json.dumps({"kind": "note"}) + "\n")
    daemon.start()

    async def history() -> list[dict]:
        async with daemon.client() as client:
            return (await client.request("chat.history", {"session": "hist"}))["messages"]

    messages = asyncio.run(history())
    assert [m["text"] for m in messages if m["role"] in ("user", "assistant")] == ["hello", "hello back"]
