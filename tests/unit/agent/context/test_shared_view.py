"""A conversation several people share: each person's run sees the people's messages, the posted answers
and its own work — never another person's tool calls, results, notes, tasks or summaries of them.

The rule is agent/context/shared_view.py; these tests drive it through the parts that show the model
something: the request (ContextBuilder), compaction, consolidation, the task line and restatement,
drift and completeness spans, background results, a sub-agent's report and the memory tools."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from clawgate.agent.context.compaction import Compactor
from clawgate.agent.context.consolidation import Consolidator
from clawgate.agent.context.shared_view import common_view, run_person, view_for, visible_records
from clawgate.agent.memory.store import Memory
from clawgate.agent.providers.base import ModelRequest, ModelResponse
from clawgate.agent.session import Session
from clawgate.agent.supervision.run_view import span
from clawgate.agent.tasks.restatement import Restatement
from clawgate.agent.tasks.store import Step, Task, TaskStore
from clawgate.agent.tasks.task_tool import TaskTool
from clawgate.agent.tools.base import ToolError
from clawgate.agent.tools.memory import MemoryGet, MemorySearchTool
from clawgate.config.schema import AgentSettings
from clawgate.workspace.guard import WorkspaceGuard
from clawgate.workspace.users import OWNER
from tests.context_helpers import builder, workspace

GUEST = "slack:U_GUEST"
SECRET = "owner-only-9f3c: the deploy key is ssh-ed25519 AAAAC3Nza"
PRIVATE_CALL = "private/notes.txt"


def owner_turn(session: Session, text: str, run: str, context: str = "") -> None:
    session.append("user", text=text, inbound_id=run, channel="slack", chat_id="C1", sender_id="U_OWNER", owner=True,
                   user=OWNER, context=context or f"[runtime] time: now · channel: slack · chat: C1 (group) · sender: @boss")


def guest_turn(session: Session, text: str, run: str) -> None:
    session.append("user", text=text, inbound_id=run, channel="slack", chat_id="C1", sender_id="U_GUEST", owner=False,
                   user=GUEST, context="[runtime] time: now · channel: slack · chat: C1 (group) · sender: @guest")


def tool_work(session: Session, run: str, path: str, output: str, call_id: str) -> None:
    session.append("assistant", run_id=run, content=[{"type": "text", "text": f"reading {path} first"},
                                                     {"type": "tool_use", "id": call_id, "name": "read_file",
                                                      "input": {"path": path}}])
    session.append("tool_intent", id=call_id, name="read_file", input={"path": path})
    session.append("tool_done", id=call_id, content=output, is_error=False, status="ok")
    session.append("tool_results", run_id=run, results=[{"tool_use_id": call_id, "content": output, "is_error": False}])


def posted(session: Session, run: str, text: str) -> None:
    session.append("assistant", run_id=run, content=[{"type": "text", "text": text}])


def shared_session(tmp_path: Path) -> Session:
    """The owner reads a private file (never posted), answers; a check turn and a restatement note are
    part of the owner's run; then the guest writes."""
    session = Session("slack:C1", tmp_path / "sessions" / "slack%3AC1.jsonl", fsync=False)
    owner_turn(session, "summarise my notes file", "r1",
               context="[runtime] time: now · channel: slack · chat: C1 (group) · sender: @boss\n"
                       "task: task t_1 [in_progress] migrate the owner's secret vault — step 1/2")
    tool_work(session, "r1", PRIVATE_CALL, SECRET, "toolu_owner1")
    session.append("note", text="[runtime] I am Claw. Current task: migrate the owner's secret vault.", followup=True)
    posted(session, "r1", "draft that was checked and not sent: " + SECRET[:20])
    session.append("user", text="[clawgate check] Not done yet: owner's vault step", owner=True, reflection=True)
    posted(session, "r1", "Your notes are summarised; nothing else to say here.")
    guest_turn(session, "hi, what did you just do?", "r2")
    return session


def flat(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def test_a_guest_run_sees_the_messages_and_posted_answers_never_the_owner_work(tmp_path: Path) -> None:
    session = shared_session(tmp_path)
    context = builder(workspace(tmp_path))
    messages = context.messages(session)
    seen = flat(messages)
    assert run_person(session) == GUEST
    for leaked in (SECRET, SECRET[:20], PRIVATE_CALL, "toolu_owner1", "tool_use", "tool_result", "reading private",
                   "Current task", "secret vault", "[clawgate check]"):
        assert leaked not in seen, leaked
    assert "summarise my notes file" in seen and "sender: @boss" in seen  # who said what, as everyone saw it
    assert "Your notes are summarised; nothing else to say here." in seen  # the answer that was posted
    assert "hi, what did you just do?" in seen
    assert [m["role"] for m in messages] == ["user", "assistant", "user"]
    # the projection is a pure function of the log: the same bytes again (the prompt cache holds)
    assert context.messages(session) == messages


def test_the_owner_still_sees_all_of_their_own_work_and_none_of_the_guest_s(tmp_path: Path) -> None:
    session = shared_session(tmp_path)
    tool_work(session, "r2", "guest/diary.txt", "guest-only-77aa diary", "toolu_guest1")
    posted(session, "r2", "I read a file for you.")
    owner_turn(session, "and now?", "r3")
    seen = flat(builder(workspace(tmp_path)).messages(session))
    assert SECRET in seen and "toolu_owner1" in seen and "[clawgate check]" in seen  # the owner's own run, whole
    assert "guest-only-77aa" not in seen and "toolu_guest1" not in seen and "guest/diary.txt" not in seen
    assert "hi, what did you just do?" in seen and "I read a file for you." in seen


def test_alone_in_a_conversation_the_view_is_the_session_itself(tmp_path: Path) -> None:
    session = Session("main", tmp_path / "main.jsonl", fsync=False)
    owner_turn(session, "read it", "r1")
    tool_work(session, "r1", PRIVATE_CALL, SECRET, "toolu_1")
    assert view_for(session, OWNER) is session  # one person: the projection and its cache are untouched
    assert SECRET in flat(builder(workspace(tmp_path)).messages(session))


def test_a_foreign_run_s_unposted_answer_never_shows_and_triggers_are_not_quoted(tmp_path: Path) -> None:
    session = Session("grp", tmp_path / "grp.jsonl", fsync=False)
    owner_turn(session, "start", "r1")
    posted(session, "r1", "started")
    # a background job's wake-up for the owner: its text (the owner's job, the owner's output) is theirs
    session.append("user", text=f"[clawgate] Background job bg-1 ended: {SECRET}", inbound_id="bg:1", channel="background",
                   chat_id="grp", sender_id="U_OWNER", owner=True, user=OWNER)
    tool_work(session, "bg:1", "out.log", SECRET, "toolu_2")  # stopped after a tool turn: nothing of it was posted
    guest_turn(session, "hello", "r2")
    seen = flat(builder(workspace(tmp_path)).messages(session))
    assert SECRET not in seen and "out.log" not in seen
    assert "a background run for another person" in seen and "started" in seen


def test_compaction_of_a_shared_session_compacts_only_what_the_person_sees(tmp_path: Path) -> None:
    session = shared_session(tmp_path)
    for n in range(6):
        tool_work(session, "r2", f"mine{n}.txt", f"guest output {n} " + "x" * 900, f"toolu_g{n}")
    posted(session, "r2", "done")
    guest_turn(session, "more", "r4")
    compactor = Compactor(keep=2, chunk_chars=1000, min_chars=600)
    seen = flat(builder(workspace(tmp_path), compactor=compactor).messages(session))
    assert "[compacted: read_file output" in seen and SECRET not in seen
    assert "sessions/slack%3AC1.jsonl" in seen  # where the guest's own full output is


class Recording:
    """A provider that answers every request with a fixed summary and keeps the requests."""

    name = "recording"

    def __init__(self) -> None:
        self.requests: list[ModelRequest] = []

    async def complete(self, request: ModelRequest, on_text: Any = None) -> ModelResponse:
        self.requests.append(request)
        return ModelResponse(content=[{"type": "text", "text": "- people talked about notes"}], stop_reason="end_turn")

    async def close(self) -> None:
        return None


async def test_a_shared_session_is_consolidated_from_what_everyone_saw(tmp_path: Path) -> None:
    root = workspace(tmp_path)
    session = shared_session(tmp_path)
    posted(session, "r2", "I only know what was said here.")
    for n in range(3):
        owner_turn(session, f"next {n}", f"r{5 + n}")
        tool_work(session, f"r{5 + n}", f"vault{n}.txt", SECRET + " " * 2000, f"toolu_v{n}")
        posted(session, f"r{5 + n}", f"ok {n}")
    context = builder(root)
    provider = Recording()
    consolidator = Consolidator(provider=provider, context=context, memory=Memory(root),
                                settings=AgentSettings(context_tokens=2_000, consolidate_at=0.5, model="m"))
    record = await consolidator.maybe_consolidate(session)
    assert record is not None and record["audience"] == "everyone"
    sent = flat(provider.requests[0].messages)
    assert SECRET not in sent and "vault" not in sent and "summarise my notes file" in sent
    guest_turn(session, "and you?", "r9")
    seen = flat(context.messages(session))
    assert "people talked about notes" in seen and SECRET not in seen


async def test_an_earlier_summary_of_one_person_s_work_is_not_shown_to_a_newcomer(tmp_path: Path) -> None:
    session = Session("grp", tmp_path / "grp.jsonl", fsync=False)
    for n in range(3):
        owner_turn(session, f"step {n}", f"r{n}")
        tool_work(session, f"r{n}", "vault.txt", SECRET, f"toolu_{n}")
        posted(session, f"r{n}", f"ok {n}")
    session.append("consolidated", upto=6, ok=True, summary=f"- the owner read {SECRET}",
                   pointer=f"[memory] summary: the owner read {SECRET}", seq_to=20)
    guest_turn(session, "hello", "g1")
    seen = flat(builder(workspace(tmp_path)).messages(session))
    assert SECRET not in seen and "[memory] The earlier part of this conversation" in seen and "ok 2" in seen
    owner_turn(session, "again", "r9")
    assert f"the owner read {SECRET}" in flat(builder(workspace(tmp_path)).messages(session))  # the owner's own


def test_tasks_restatement_and_spans_are_per_person(tmp_path: Path) -> None:
    session = shared_session(tmp_path)
    store = TaskStore(tmp_path / "tasks", fsync=False)
    vault = Task(goal="migrate the owner's secret vault", session_key=session.key, status="in_progress",
                 steps=[Step(text="copy keys")], turns=50, user=OWNER)
    store.save(vault)
    restate = Restatement("Claw", store.current_for, after_turns=20)
    assert store.current_for(session, GUEST) is None and restate(session, GUEST) is None
    assert store.current_for(session, OWNER) is vault and "secret vault" in (restate(session, OWNER) or "")
    # the runtime block of the guest's turn carries no line about the owner's task
    context = builder(workspace(tmp_path))
    context.contributors.append(restate)
    block = context.runtime_block(session, channel="slack", chat_id="C1", sender_id="U_GUEST",
                                  meta={"private": False, "username": "guest"}, person=GUEST)
    assert "vault" not in block and "sender: @guest (id U_GUEST)" in block
    # drift and the completeness check read a span of this person's runs only
    tool_work(session, "r2", "guest.txt", "guest bytes", "toolu_g")
    assert [s.key for s in span(session, 0, person=GUEST).steps] == ['read_file(path="guest.txt")']
    assert [s.key for s in span(session, 0, person=OWNER).steps] == [f'read_file(path="{PRIVATE_CALL}")']


async def test_the_task_tool_never_names_another_person_s_task(tmp_path: Path) -> None:
    store = TaskStore(tmp_path / "tasks", fsync=False)
    vault = Task(goal="migrate the owner's secret vault", session_key="slack:C1", status="in_progress",
                 steps=[Step(text="copy keys")], user=OWNER)
    store.save(vault)
    tool = TaskTool(store)
    guest = _ctx(tmp_path, owner=False, user=GUEST)
    for args in ({"action": "show"}, {"action": "show", "task_id": vault.id},
                 {"action": "note", "task_id": vault.id, "text": "hijacked"}):
        with pytest.raises(ToolError) as refused:
            await tool.run(TaskTool.Arguments(**args), guest)
        assert "vault" not in str(refused.value)
    created = await tool.run(TaskTool.Arguments(action="plan", goal="plan a picnic", steps=["buy bread"]), guest)
    assert created.startswith("created") and "vault" not in created  # the owner's active task does not block it
    assert "hijacked" not in (store.get(vault.id) or vault).notes


def _ctx(tmp_path: Path, *, owner: bool, user: str):
    from clawgate.agent.tools.base import ToolContext

    root = tmp_path / ("owner" if owner else "guest")
    root.mkdir(exist_ok=True)
    return ToolContext(session_key="slack:C1", channel="slack", chat_id="C1", sender_id="U_GUEST", run_id="r2",
                       workspace=WorkspaceGuard(root), owner=owner, user=user)


async def test_a_guest_s_memory_tools_read_the_transcript_as_the_guest_s_runs_see_it(tmp_path: Path) -> None:
    session = shared_session(tmp_path)
    sessions = session.path.parent
    guest, owner = _ctx(tmp_path, owner=False, user=GUEST), _ctx(tmp_path, owner=True, user=OWNER)
    search = MemorySearchTool(sessions)
    found = await search.run(MemorySearchTool.Arguments(query="deploy key ssh"), guest)
    assert SECRET not in found and "no matches" in found
    assert "deploy key" in await search.run(MemorySearchTool.Arguments(query="deploy key ssh"), owner)
    assert "summarised" in await search.run(MemorySearchTool.Arguments(query="summarised"), guest)
    get = MemoryGet(sessions)
    whole = await get.run(MemoryGet.Arguments(path=f"sessions/{session.path.name}", seq=1, count=400), guest)
    assert SECRET not in whole and PRIVATE_CALL not in whole and "summarise my notes file" in whole
    assert SECRET in await get.run(MemoryGet.Arguments(path=f"sessions/{session.path.name}", seq=1, count=400), owner)


def test_visible_records_keep_one_s_own_work_whole(tmp_path: Path) -> None:
    session = shared_session(tmp_path)
    tool_work(session, "r2", "guest.txt", "guest bytes", "toolu_g")
    kinds = [(r["kind"], r.get("run_id")) for r in visible_records(session.records, GUEST)]
    assert ("tool_results", "r2") in kinds and ("tool_results", "r1") not in kinds
    common = flat(common_view(session).llm_messages())
    assert "guest bytes" not in common and SECRET not in common and "hi, what did you just do?" in common


def test_another_person_s_context_reset_leaves_a_valid_window_without_its_brief(tmp_path: Path) -> None:
    from tests.fakes.anthropic.validation import _validate

    session = Session("grp", tmp_path / "grp.jsonl", fsync=False)
    owner_turn(session, "long job", "r1")
    tool_work(session, "r1", "vault.txt", SECRET, "toolu_1")
    # drift control resets the owner's run: a placeholder answer, a brief, the window moved to the brief
    session.append("assistant", run_id="r1", drift_reset=True, content=[{"type": "text", "text": "(context reset)"}])
    session.append("user", text=f"[clawgate] Context reset. Goal: the vault. Progress: read {SECRET}", owner=True,
                   drift_reset=True)
    session.append("consolidated", upto=session.message_count - 1, ok=True, reset=True, summary="brief")
    tool_work(session, "r1", "vault2.txt", SECRET, "toolu_2")
    posted(session, "r1", "The job is done.")
    guest_turn(session, "what happened?", "r2")
    messages = builder(workspace(tmp_path)).messages(session)
    seen = flat(messages)
    assert SECRET not in seen and "Context reset" not in seen
    assert messages[0]["role"] == "user" and "long job" in seen and "The job is done." in seen
    assert _validate({"model": "m", "max_tokens": 10, "messages": messages}) is None


def test_a_guest_s_context_reset_leaves_the_owner_s_window_where_it_was(tmp_path: Path) -> None:
    """A drift reset restarts the resetting person's view only: the owner's next request still opens with
    the owner's own earlier turns, and the guest's brief is in nobody else's view."""
    from tests.fakes.anthropic.validation import _validate

    session = Session("grp", tmp_path / "grp.jsonl", fsync=False)
    owner_turn(session, "first owner job", "r1")
    posted(session, "r1", "Owner job done.")
    guest_turn(session, "guest job", "r2")
    session.append("assistant", run_id="r2", drift_reset=True, content=[{"type": "text", "text": "(context reset)"}])
    session.append("user", text="[clawgate] Context reset. Goal: guest-brief-7c1", owner=False, drift_reset=True)
    session.append("consolidated", upto=session.message_count - 1, ok=True, reset=True, summary="guest-brief-7c1")
    posted(session, "r2", "Guest job done.")
    owner_turn(session, "next owner question", "r3")
    owners = builder(workspace(tmp_path)).messages(view_for(session, OWNER))
    seen = flat(owners)
    assert "first owner job" in seen and "Owner job done." in seen and "next owner question" in seen
    assert "guest-brief-7c1" not in seen
    assert _validate({"model": "m", "max_tokens": 10, "messages": owners}) is None
    guest_view = view_for(session, GUEST)
    guests = flat(guest_view.llm_messages(guest_view.window_start))
    assert "guest-brief-7c1" in guests and "first owner job" not in guests  # the guest's own view restarted


def test_a_sub_agent_s_report_to_one_person_is_that_person_s_work(tmp_path: Path) -> None:
    """A guest's background child reports on the bus as a run of the guest (metadata user): the child's
    findings reach the guest's run; the owner sees only what was posted from it."""
    session = shared_session(tmp_path)
    posted(session, "r2", "I'll look into it.")
    session.append("user", text="[clawgate] Sub-agent result: guest-child-found-4e1d in guest/notes", inbound_id="sub:1",
                   channel="subagent", chat_id="C1", sender_id="U_GUEST", owner=False, user=GUEST)
    posted(session, "sub:1", "Your lookup finished.")
    owner_turn(session, "status?", "r3")
    seen = flat(builder(workspace(tmp_path)).messages(session))
    assert "guest-child-found-4e1d" not in seen and "Your lookup finished." in seen
    assert "a subagent run for another person" in seen
    guest_turn(session, "and?", "r4")
    assert "guest-child-found-4e1d" in flat(builder(workspace(tmp_path)).messages(session))


async def test_a_guest_reads_another_person_s_message_by_its_line_too(tmp_path: Path) -> None:
    session = shared_session(tmp_path)
    guest = _ctx(tmp_path, owner=False, user=GUEST)
    got = await MemoryGet(session.path.parent).run(MemoryGet.Arguments(path=f"sessions/{session.path.name}", line=1,
                                                                       count=2), guest)
    assert "line 1 seq 1 · user: summarise my notes file" in got and SECRET not in got
