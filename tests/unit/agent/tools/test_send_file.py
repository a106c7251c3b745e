"""send_file driven through the registry: confinement to the run's own workspace, the size limit,
the durable copy it queues, and the owner's approval in a tainted run."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from clawgate.agent.approvals import ApprovalBroker
from clawgate.agent.bus import OutboundMessage, discard_file, read_file, store_file
from clawgate.agent.bus.outbox_files import sweep
from clawgate.agent.core.events import EventHub
from clawgate.agent.tools import ToolContext, ToolRegistry
from clawgate.agent.tools.send_file import SendFile
from clawgate.agent.trust.taint import Taint
from clawgate.workspace.guard import WorkspaceGuard


class Env:
    def __init__(self, tmp: Path, mode: str = "allow") -> None:
        self.tmp = tmp
        self.outbox = tmp / "state" / "outbox-files"
        self.tool = SendFile(self.outbox, max_bytes=1000, limits={"small": 10}, fsync=False)
        self.events = EventHub()
        self.asked: list[dict] = []
        self.events.subscribe(lambda e: self.asked.append(e["request"]) if e["type"] == "approval_request" else None)
        self.registry = ToolRegistry([self.tool], events=self.events,
                                     approvals=ApprovalBroker(self.events, mode=mode, timeout=0.5))
        self.sent: list[OutboundMessage] = []
        self.owner_ws = WorkspaceGuard(tmp / "owner")
        self.guest_ws = WorkspaceGuard(tmp / "guest")

    def ctx(self, *, guest: bool = False, channel: str = "telegram", taint: Taint | None = None) -> ToolContext:
        return ToolContext(session_key=f"{channel}:42", channel=channel, chat_id="42", sender_id="42", run_id="in_1",
                           workspace=self.guest_ws if guest else self.owner_ws, send=self.sent.append,
                           owner=not guest, user="telegram:42" if guest else "", taint=taint or Taint())

    async def call(self, ctx: ToolContext, **args: str):
        return await self.registry.execute({"id": "t1", "name": "send_file", "input": args}, ctx)


@pytest.fixture
def env(tmp_path: Path) -> Env:
    return Env(tmp_path)


async def test_a_file_is_copied_durably_and_queued_for_this_chat(env: Env) -> None:
    (env.owner_ws.root / "out").mkdir()
    (env.owner_ws.root / "out" / "report.csv").write_bytes(b"a,b\n1,2\n")
    outcome = await env.call(env.ctx(), path="out/report.csv", caption="the numbers")
    assert not outcome.is_error and "report.csv" in outcome.content
    [msg] = env.sent
    assert (msg.channel, msg.chat_id, msg.session_key, msg.kind, msg.text) == ("telegram", "42", "telegram:42",
                                                                              "file", "the numbers")
    assert msg.file is not None and msg.file["name"] == "report.csv" and msg.file["size"] == 8
    assert msg.file["mime"] == "text/csv" and Path(msg.file["path"]).parent == env.outbox / msg.id
    (env.owner_ws.root / "out" / "report.csv").write_bytes(b"changed later")
    assert read_file(msg.file) == b"a,b\n1,2\n"  # the person gets the file as it was when sent
    again = OutboundMessage.from_dict(msg.to_dict())  # the outbox row round-trips
    assert again.file == msg.file
    discard_file(again)
    assert not (env.outbox / msg.id).exists()


def test_outbox_rows_written_before_files_existed_still_load() -> None:
    old = {"channel": "telegram", "chat_id": "1", "text": "hi", "session_key": "telegram:1", "in_reply_to": None,
           "id": "out_1", "kind": "reply", "metadata": {}}
    msg = OutboundMessage.from_dict(old)
    assert msg.file is None and msg.text == "hi"


@pytest.mark.parametrize("path", ["../guest/secret.txt", "/etc/passwd", "a/../../owner/x"])
async def test_paths_out_of_the_workspace_are_refused(env: Env, path: str) -> None:
    outcome = await env.call(env.ctx(), path=path)
    assert outcome.is_error and "outside the workspace" in outcome.content and "fix:" in outcome.content
    assert env.sent == [] and not env.outbox.exists()


async def test_a_symlink_is_refused(env: Env) -> None:
    secret = env.tmp / "secret.txt"
    secret.write_text("not yours")
    os.symlink(secret, env.owner_ws.root / "link.txt")
    outcome = await env.call(env.ctx(), path="link.txt")
    assert outcome.is_error and env.sent == []
    assert "not yours" not in outcome.content


async def test_a_guest_sends_only_from_their_own_workspace(env: Env) -> None:
    (env.owner_ws.root / "owner-only.txt").write_text("owner data")
    outcome = await env.call(env.ctx(guest=True), path="owner-only.txt")
    assert outcome.is_error and "does not exist" in outcome.content and env.sent == []
    (env.guest_ws.root / "mine.txt").write_text("guest data")
    outcome = await env.call(env.ctx(guest=True), path="mine.txt")
    assert not outcome.is_error and read_file(env.sent[0].file or {}) == b"guest data"


async def test_files_over_the_limit_are_refused_in_one_line(env: Env) -> None:
    (env.owner_ws.root / "big.bin").write_bytes(b"x" * 1001)
    (env.owner_ws.root / "eleven.bin").write_bytes(b"x" * 11)
    outcome = await env.call(env.ctx(), path="big.bin")
    assert outcome.is_error and "big.bin is 1001 bytes; telegram takes files up to 1000 bytes" in outcome.content
    assert "smaller" in outcome.content
    outcome = await env.call(env.ctx(channel="small"), path="eleven.bin")  # the channel's own, lower limit
    assert outcome.is_error and "small takes files up to 10 bytes" in outcome.content
    assert env.sent == [] and not env.outbox.exists()


async def test_in_a_tainted_run_the_owner_approves_first(tmp_path: Path) -> None:
    denied = Env(tmp_path, mode="deny")
    (denied.owner_ws.root / "notes.txt").write_text("private")
    tainted = Taint()
    tainted.add("web_fetch: http://example.test/")
    outcome = await denied.call(denied.ctx(taint=tainted), path="notes.txt")
    assert outcome.status == "denied" and denied.sent == []
    outcome = await denied.call(denied.ctx(), path="notes.txt")  # the same call in a clean run: no question
    assert not outcome.is_error and len(denied.sent) == 1


async def test_the_approval_prompt_names_the_file(tmp_path: Path) -> None:
    asking = Env(tmp_path, mode="ask")
    (asking.owner_ws.root / "notes.txt").write_text("private")
    tainted = Taint()
    tainted.add("read_file: file inbox/mail.md (not written by the agent)")
    outcome = await asking.call(asking.ctx(taint=tainted), path="notes.txt")
    assert outcome.status == "denied" and asking.sent == []  # nobody answered within the timeout
    [request] = asking.asked
    assert "notes.txt" in request["summary"] and request["tainted"]


def test_sweep_removes_only_copies_no_pending_row_names(tmp_path: Path) -> None:
    statuses = {"out_pending": "pending", "out_done": "delivered"}
    for name in ("out_pending", "out_done", "out_never_published"):
        msg = OutboundMessage("telegram", "1", "", id=name)
        store_file(tmp_path, msg, "f.txt", b"x", fsync=False)
    assert sweep(tmp_path, statuses.get) == 2
    assert [p.name for p in tmp_path.iterdir()] == ["out_pending"]
    assert sweep(tmp_path / "missing", statuses.get) == 0
