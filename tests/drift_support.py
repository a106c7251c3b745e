"""An in-process agent loop with drift control and the completeness check wired as in gateway/app.py,
talking to the fake Messages API through the real Anthropic provider (no daemon, no gateway).

Used by tests/unit/agent/supervision/test_drift_loop.py and bench/drift_eval.py. Side calls are recognisable by their
prompts: "Reflection point" (drift reflection) and "Completeness check" (the check)."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anthropic

from clawgate.agent.approvals import ApprovalBroker
from clawgate.agent.bus import InboundMessage, OutboundMessage, SqliteBus
from clawgate.agent.supervision.completeness import CompletenessCheck
from clawgate.agent.context.builder import ContextBuilder
from clawgate.agent.checkpoints import CheckpointService
from clawgate.agent.supervision.drift_control import CheckpointRestorer, DriftControl
from clawgate.agent.supervision.drift_restore import DriftRestore
from clawgate.agent.core.events import Event, EventHub
from clawgate.agent.loop import AgentLoop
from clawgate.agent.providers.anthropic import AnthropicProvider
from clawgate.agent.session import Session, SessionManager
from clawgate.agent.tasks.store import TaskStore
from clawgate.agent.tools import ToolRegistry
from clawgate.agent.toolset import default_tools
from clawgate.config.schema import AnthropicSettings, Settings
from tests.fakes.anthropic_api import FakeAnthropic, Reply, text
from clawgate.workspace.guard import WorkspaceGuard

REFLECT = "Reflection point"
CHECK = "Completeness check"


def reflection(on_track: bool, assessment: str = "repeating a failing call", next_action: str = "try another way") -> Reply:
    return text(json.dumps({"on_track": on_track, "assessment": assessment, "next_action": next_action}))


def check(complete: bool, *, missing: list[str] | None = None, supplements: list[dict[str, str]] | None = None,
          analysis: str = "reviewed", verification: str = "read back") -> Reply:
    return text(json.dumps({"is_complete": complete, "analysis": analysis, "verification": verification,
                            "missing": missing or [], "supplements": supplements or []}))


def is_side(body: dict[str, Any], marker: str) -> bool:
    first = body["messages"][0]["content"]
    return isinstance(first, list) and first[0].get("text", "").startswith(marker)


@dataclass
class Rig:
    loop: AgentLoop
    bus: SqliteBus
    tasks: TaskStore
    workspace: WorkspaceGuard
    fake: FakeAnthropic
    events: list[Event] = field(default_factory=list)
    checkpoints: CheckpointService | None = None
    drift_restore: DriftRestore | None = None

    async def send(self, text_: str, session: str = "s", timeout: float = 60.0, owner: bool = True) -> list[OutboundMessage]:
        """Run one message (and any continuation it queued on the bus); its replies."""
        msg = InboundMessage(channel="gateway", chat_id=session, sender_id="u", session_key=session, text=text_,
                             metadata={"owner": owner})
        self.bus.publish_inbound(msg)
        while self.bus.inbound_depth:
            self.loop.lanes.submit(session, await self.bus.next_inbound())
            await asyncio.wait_for(self.loop.lanes.join(), timeout)
        return [o for o in self.bus.undelivered() if o.in_reply_to == msg.id]

    def replies(self) -> list[OutboundMessage]:
        return list(self.bus.undelivered())

    def session(self, key: str = "s") -> Session:
        return self.loop.sessions.get(key)

    def log_events(self, name: str, key: str = "s") -> list[dict[str, Any]]:
        return [r for r in self.session(key).records if r.get("kind") == "event" and r.get("name") == name]

    def side_calls(self, marker: str) -> list[dict[str, Any]]:
        return [b for b in self.fake.requests if is_side(b, marker)]

    def main_calls(self) -> list[dict[str, Any]]:
        return [b for b in self.fake.requests if not is_side(b, REFLECT) and not is_side(b, CHECK)]

    def all_records(self, key: str = "s") -> list[dict[str, Any]]:
        """The live log and any branch a restore abandoned, each record once (copies a restore carried
        over are left out), in time order."""
        live = self.session(key).path
        seen: dict[tuple[Any, ...], dict[str, Any]] = {}
        for path in [live, *live.parent.glob(live.name.removesuffix(".jsonl") + ".*.abandoned")]:
            for line in path.read_text().splitlines():
                r = json.loads(line)
                if not r.get("carried"):
                    seen.setdefault((r["seq"], r["ts"], r["kind"]), r)
        return sorted(seen.values(), key=lambda r: (r["ts"], r["seq"]))

    def tokens(self) -> int:
        """Tokens spent (input + output) as the fake reports them, over every call."""
        total = 0
        for r in self.all_records():
            if r.get("kind") == "assistant" and r.get("usage"):
                total += int(r["usage"].get("input_tokens", 0)) + int(r["usage"].get("output_tokens", 0))
            if r.get("kind") == "event" and r.get("tokens"):
                total += int(r["tokens"])
        return total


def build(tmp_path: Path, fake: FakeAnthropic, settings: Settings | None = None,
          restorer: CheckpointRestorer | None = None, checkpoints: bool = False) -> Rig:
    """checkpoints=True: a real CheckpointService and drift control's restore rung, wired as in gateway/app.py."""
    settings = settings or Settings()
    settings.tools.approval_mode = "allow"
    ws = WorkspaceGuard(tmp_path / "ws")
    hub = EventHub()
    bus = SqliteBus.open(tmp_path / "db.sqlite", fsync=False)
    tasks = TaskStore(tmp_path / "tasks", fsync=False)
    tools = ToolRegistry(default_tools(settings, tasks=tasks), events=hub, approvals=ApprovalBroker(hub, mode="allow"))
    # The SDK's httpx client rather than the daemon's aiohttp transport: a rig is never closed, and an
    # unclosed aiohttp session warns at exit. The transport is covered by tests/unit/agent/providers/test_provider_http.py
    # and every end-to-end test.
    provider = AnthropicProvider(AnthropicSettings(api_key="k", base_url=fake.base_url, max_retries=0), stream=False,
                                 http_client=anthropic.DefaultAsyncHttpxClient())
    context = ContextBuilder(ws.root, tools=tools.definitions, model="claude-test", max_tokens=1024)
    sessions = SessionManager(tmp_path / "sessions", fsync=False)
    loop = AgentLoop(bus=bus, sessions=sessions, provider=provider,
                     tools=tools, context=context, events=hub, settings=settings.agent, workspace=ws)
    service = going_back = None
    if checkpoints:
        service = CheckpointService(folder=tmp_path / "checkpoints", workspace=ws.root, sessions=sessions, tasks=tasks,
                                    events=hub, settings=settings.checkpoints, version="test", busy=loop.busy,
                                    invalidate=context.invalidate, fsync=False)
        sessions.observers += [service.tapes.on_append, service.on_append]
        restorer = going_back = DriftRestore(service, sessions, bus, hub, tmp_path / "checkpoints/drift", fsync=False)
        loop.after_run.append(going_back.after_run)
    loop.after_turn.append(DriftControl(settings.drift, provider=provider, model="claude-test", tasks=tasks,
                                        context=context, events=hub, restorer=restorer))
    loop.before_final.append(CompletenessCheck(settings.reflection, provider=provider, model="claude-test",
                                               tasks=tasks, tools=tools.definitions, events=hub,
                                               side_effects=tools.has_side_effects))
    rig = Rig(loop=loop, bus=bus, tasks=tasks, workspace=ws, fake=fake, checkpoints=service, drift_restore=going_back)
    hub.subscribe(rig.events.append)
    return rig
