"""Sub-agents driven without sockets: the real loop, sessions, bus and tools; a scripted model per session.

What the end-to-end tests cannot hit on purpose: the parent dying in the one-write window
after its child finished and before the parent recorded the spawn's result, a background child
interrupted mid-run, approvals of a child's call, and the key and budget rules.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from clawgate.agent.approvals import ApprovalBroker
from clawgate.agent.bus import InboundMessage, SqliteBus
from clawgate.agent.context.builder import ContextBuilder
from clawgate.agent.core.events import EventHub
from clawgate.agent.loop import AgentLoop
from clawgate.agent.providers.base import ModelRequest, ModelResponse
from clawgate.agent.session import SessionManager, check_session_key
from clawgate.agent.jobs.subagents import Subagents, child_key
from clawgate.agent.tools import ToolRegistry
from clawgate.agent.jobs.spawn_tool import Spawn
from clawgate.agent.toolset import default_tools
from clawgate.channels.kit.keys import parse_session_key
from clawgate.config.schema import Settings, SubagentSettings
from clawgate.workspace.guard import WorkspaceGuard
from tests.waiting import wait_until_async


class RoutedProvider:
    """Answers each session from its own script: "parent" for the main session, "child" for any sub-agent."""

    name = "routed"

    def __init__(self, parent: list[Any], child: list[Any]) -> None:
        self.scripts = {"parent": parent, "child": child}
        self.requests: dict[str, list[ModelRequest]] = {"parent": [], "child": []}

    async def complete(self, request: ModelRequest, on_text=None) -> ModelResponse:
        who = "child" if request.session_key.startswith("sub-") else "parent"
        self.requests[who].append(request)
        if not self.scripts[who]:
            raise AssertionError(f"unexpected {who} model call")
        reply = self.scripts[who].pop(0)
        return await reply() if callable(reply) else reply

    async def close(self) -> None:
        return None


def text(t: str) -> ModelResponse:
    return ModelResponse(content=[{"type": "text", "text": t}], stop_reason="end_turn", usage={"input_tokens": 10, "output_tokens": 5})


def call(name: str, args: dict, cid: str) -> ModelResponse:
    return ModelResponse(content=[{"type": "tool_use", "id": cid, "name": name, "input": args}], stop_reason="tool_use",
                         usage={"input_tokens": 10, "output_tokens": 5})


class World:
    def __init__(self, tmp: Path, provider: RoutedProvider, *, approvals: str = "deny") -> None:
        settings = Settings()
        self.tmp, self.provider = tmp, provider
        self.ws = WorkspaceGuard(tmp / "ws")
        self.events = EventHub()
        self.seen: list[dict] = []
        self.events.subscribe(self.seen.append)
        self.bus = SqliteBus.open(tmp / "db.sqlite", fsync=False)
        self.approvals = ApprovalBroker(self.events, mode=approvals, timeout=30)  # type: ignore[arg-type]
        self.tools = ToolRegistry(default_tools(settings), events=self.events, approvals=self.approvals)
        context = ContextBuilder(self.ws.root, tools=self.tools.definitions, model="m", max_tokens=100)
        self.sessions = SessionManager(tmp / "sessions", fsync=False)
        self.loop = AgentLoop(bus=self.bus, sessions=self.sessions, provider=provider, tools=self.tools, context=context,
                              events=self.events, settings=settings.agent, workspace=self.ws)
        self.subagents = Subagents(SubagentSettings(), parent=self.loop, sessions=self.sessions, bus=self.bus,
                                   events=self.events, pending=tmp / "pending", fsync=False)
        self.tools.add(Spawn(self.subagents))

    async def ask(self, text_: str, session: str = "p", msg_id: str = "in_1", *, owner: bool = True) -> str:
        msg = InboundMessage(id=msg_id, channel="gateway", chat_id=session, sender_id="u", session_key=session,
                             text=text_, metadata={"owner": owner})
        answer, _ = await asyncio.wait_for(self.loop.respond(self.sessions.get(session), msg), 20)
        return answer


def _records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


async def test_a_finished_child_is_not_run_again_when_the_parent_died_before_recording_it(tmp_path: Path) -> None:
    provider = RoutedProvider([call("spawn", {"task": "summarise"}, "s1"), text("parent done")], [text("child summary")])
    world = World(tmp_path, provider)
    assert await world.ask("go") == "parent done"
    # The crash window: the child's result is in its log, the parent's log ends at the spawn's intent.
    log = tmp_path / "sessions/p.jsonl"
    records = _records(log)
    cut = next(i for i, r in enumerate(records) if r["kind"] == "tool_intent") + 1
    log.write_text("".join(json.dumps(r) + "\n" for r in records[:cut]))
    key = child_key("p", "s1")
    world.sessions.forget("p")
    world.sessions.forget(key)
    provider.scripts["parent"] = [text("parent done after the restart")]  # no child script: a re-run would fail
    assert await world.ask("go") == "parent done after the restart"
    assert len(provider.requests["child"]) == 1
    result = provider.requests["parent"][-1].messages[-1]["content"][0]["content"]
    assert "child summary" in result and "recorded before a restart, not run again" in result
    ends = [e for e in world.seen if e["type"] == "subagent_end"]
    assert [e["replayed"] for e in ends] == [False, True]


async def test_an_unfinished_waiting_child_resumes_from_its_log(tmp_path: Path) -> None:
    """The parent's spawn has an intent and no result: it runs again and the child continues, its
    completed write is not repeated, and nothing is reported as an unknown outcome."""
    provider = RoutedProvider([call("spawn", {"task": "write"}, "s1")],
                              [call("write_file", {"path": "w.txt", "content": "x"}, "c1"),
                               lambda: asyncio.sleep(3600)])
    world = World(tmp_path, provider)
    with pytest.raises(asyncio.TimeoutError):
        await asyncio.wait_for(world.ask("go"), 2)  # "killed" during the child's second model call
    key = child_key("p", "s1")
    for session in ("p", key):
        world.sessions.forget(session)
    (tmp_path / "ws/w.txt").write_text("changed since")  # a repeated write would overwrite this
    provider.scripts = {"parent": [text("parent done")], "child": [text("wrote w.txt")]}
    assert await world.ask("go") == "parent done"
    assert (tmp_path / "ws/w.txt").read_text() == "changed since"
    child = _records(tmp_path / f"sessions/{key.replace('@', '%40')}.jsonl")
    assert [r["id"] for r in child if r["kind"] == "tool_intent"] == ["c1"]
    assert "tool_outcome_unknown" not in json.dumps(_records(tmp_path / "sessions/p.jsonl"))
    assert "wrote w.txt" in provider.requests["parent"][-1].messages[-1]["content"][0]["content"]


async def test_a_background_child_interrupted_mid_run_is_resumed_and_reports_once(tmp_path: Path) -> None:
    provider = RoutedProvider([call("spawn", {"task": "slow", "background": True}, "b1"), text("started")],
                              [call("write_file", {"path": "bg.txt", "content": "once"}, "c1"),
                               lambda: asyncio.sleep(3600)])
    world = World(tmp_path, provider)
    assert await world.ask("go") == "started"
    key = child_key("p", "b1")
    pending = tmp_path / "pending" / f"{key.split('@')[0]}.json"
    await wait_until_async(lambda: len(provider.requests["child"]) == 2, "the child's second model call")
    assert pending.exists() and (tmp_path / "ws/bg.txt").read_text() == "once"
    await world.subagents.close()  # shutdown mid-run
    assert pending.exists() and not world.bus.has_unanswered("p")
    # a new daemon: same files, fresh memory
    (tmp_path / "ws/bg.txt").write_text("edited later")
    world.sessions.forget(key)
    again = Subagents(SubagentSettings(), parent=world.loop, sessions=world.sessions, bus=world.bus, events=world.events,
                      pending=tmp_path / "pending", fsync=False)
    provider.scripts["child"] = [text("background result")]
    assert again.resume() == [key]
    await wait_until_async(lambda: not pending.exists(), "the resumed child to finish")
    [report] = list(world.bus.unanswered())
    assert report.id == f"subagent:{key}" and report.session_key == "p" and report.metadata["owner"] is True
    assert "background result" in report.text and report.metadata["deliver"] == {"channel": "gateway", "chat_id": "p"}
    assert (tmp_path / "ws/bg.txt").read_text() == "edited later"  # the completed write was not repeated
    assert again.resume() == [] and len(list(world.bus.unanswered())) == 1


async def _pending_approvals(world: World) -> list[dict]:
    """The approval requests once there is one."""
    return await wait_until_async(world.approvals.pending, "an approval request")


async def test_a_childs_approval_is_asked_on_the_main_session(tmp_path: Path) -> None:
    provider = RoutedProvider([call("spawn", {"task": "risky"}, "s1"), text("parent done")],
                              [call("exec", {"argv": ["./run.sh"]}, "c1"), text("child could not")])
    world = World(tmp_path, provider, approvals="ask")
    answer = asyncio.ensure_future(world.ask("go"))
    [request] = await _pending_approvals(world)
    assert request["session_key"] == "p" and "asked by a sub-agent" in request["reason"] and request["owner"] is True
    world.approvals.resolve(request["id"], False)
    assert await answer == "parent done"


async def test_withheld_tools_are_refused_with_the_reason(tmp_path: Path) -> None:
    provider = RoutedProvider([call("spawn", {"task": "t"}, "s1"), text("done")],
                              [call("cron", {"action": "list"}, "c1"), call("message", {"text": "hi"}, "c2"), text("ok")])
    world = World(tmp_path, provider)
    await world.ask("go")
    results = [m for m in provider.requests["child"][-1].messages if m["role"] == "user"][-2:]
    cron, message = (m["content"][0]["content"] for m in results)
    assert "cron is not available to a sub-agent" in cron and "message is not available to a sub-agent" in message


def test_child_keys_are_stable_valid_and_not_a_channels_key() -> None:
    key = child_key("telegram:123", "toolu_1")
    assert key == child_key("telegram:123", "toolu_1") != child_key("telegram:123", "toolu_2")
    assert key.startswith("sub-") and key.endswith("@telegram:123") and parse_session_key(key, "telegram") is None
    long_parent = "x" * 200
    assert check_session_key(child_key(long_parent, "toolu_1")) == child_key(long_parent, "toolu_1")


def test_a_call_may_lower_the_budget_but_never_raise_it(tmp_path: Path) -> None:
    world = World(tmp_path, RoutedProvider([], []))
    world.subagents.settings = SubagentSettings(max_turns=5, max_tokens=10_000)
    assert world.subagents.budget(None, None) == (5, 10_000)
    assert world.subagents.budget(2, 3000) == (2, 3000)
    assert world.subagents.budget(50, 10**9) == (5, 10_000)


def test_only_turns_of_concurrent_tools_run_concurrently(tmp_path: Path) -> None:
    tools = World(tmp_path, RoutedProvider([], [])).tools
    spawn = {"name": "spawn", "id": "a"}
    assert tools.concurrent([spawn, {**spawn, "id": "b"}])
    assert not tools.concurrent([spawn])
    assert not tools.concurrent([spawn, {"name": "write_file", "id": "c"}])
    assert not tools.concurrent([spawn, {"name": "no_such_tool", "id": "d"}])


async def test_background_children_are_capped(tmp_path: Path) -> None:
    """A run talked into spawning without end (say, by a web page) is refused past the cap."""
    world = World(tmp_path, RoutedProvider([], [lambda: asyncio.sleep(3600)] * 10))
    world.subagents.settings = SubagentSettings(max_concurrent=1)
    calls = [call("spawn", {"task": f"job {i}", "background": True}, f"b{i}") for i in range(5)]
    world.provider.scripts["parent"] = [*calls, text("done")]
    await world.ask("go")
    results = [m["content"][0]["content"] for m in world.provider.requests["parent"][-1].messages
               if m["role"] == "user" and m["content"][0].get("type") == "tool_result"]
    assert [r.startswith("Started sub-agent") for r in results] == [True] * 4 + [False]
    assert "4 background sub-agents are already running (the limit is 4)" in results[-1]
    await world.subagents.close()


async def test_the_pending_list_is_user_only_and_a_corrupt_entry_is_moved_aside(tmp_path: Path) -> None:
    world = World(tmp_path, RoutedProvider([call("spawn", {"task": "t", "background": True}, "b1"), text("ok")],
                                           [lambda: asyncio.sleep(3600)]))
    await world.ask("go")
    pending = tmp_path / "pending"
    assert pending.stat().st_mode & 0o777 == 0o700
    assert all(p.stat().st_mode & 0o777 == 0o600 for p in pending.iterdir())
    await world.subagents.close()
    (pending / "sub-broken.json").write_text("{not json")
    fresh = Subagents(SubagentSettings(), parent=world.loop, sessions=world.sessions, bus=world.bus,
                      events=world.events, pending=pending, fsync=False)
    assert fresh.resume() == [child_key("p", "b1")]
    assert (pending / "sub-broken.corrupt").exists()
    await fresh.close()


async def test_with_max_depth_2_a_child_may_spawn_once_more_and_approvals_reach_the_main_session(tmp_path: Path) -> None:
    calls: list[ModelRequest] = []

    class Nested(RoutedProvider):
        async def complete(self, request: ModelRequest, on_text=None) -> ModelResponse:
            calls.append(request)
            depth = request.session_key.count("sub-")
            script = {0: self.scripts["parent"], 1: self.scripts["child"], 2: self.scripts["grandchild"]}[depth]
            return script.pop(0)

    provider = Nested([call("spawn", {"task": "delegate"}, "s1"), text("main done")],
                      [call("spawn", {"task": "deeper"}, "s2"), text("child relayed")])
    provider.scripts["grandchild"] = [call("exec", {"argv": ["./x.sh"]}, "g1"), text("grandchild result")]
    world = World(tmp_path, provider, approvals="ask")
    world.subagents.settings = SubagentSettings(max_depth=2)
    answer = asyncio.ensure_future(world.ask("go"))
    [request] = await _pending_approvals(world)
    assert request["session_key"] == "p"  # the grandchild's approval is asked where the person watches
    world.approvals.resolve(request["id"], False)
    assert await answer == "main done"
    child_tools = {t["name"] for t in next(c for c in calls if c.session_key.count("sub-") == 1).tools}
    grandchild_tools = {t["name"] for t in next(c for c in calls if c.session_key.count("sub-") == 2).tools}
    assert "spawn" in child_tools and "spawn" not in grandchild_tools
    assert "grandchild result" in calls[-2].messages[-1]["content"][0]["content"]


async def test_a_guests_background_report_acts_for_the_guest(tmp_path: Path) -> None:
    """The report is a message nobody typed: it must carry the parent run's rights, not more."""
    provider = RoutedProvider([call("spawn", {"task": "t", "background": True}, "b1"), text("started")],
                              [text("guest's result")])
    world = World(tmp_path, provider)
    assert await world.ask("go", owner=False) == "started"
    await wait_until_async(lambda: list(world.bus.unanswered()), "the background report")
    [report] = list(world.bus.unanswered())
    assert report.metadata["owner"] is False and report.sender_id == "u"
    child = _records(tmp_path / f"sessions/{child_key('p', 'b1').replace('@', '%40')}.jsonl")
    assert next(r for r in child if r["kind"] == "user")["owner"] is False
