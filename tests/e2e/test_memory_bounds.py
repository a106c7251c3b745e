"""Memory stays bounded by what is active: idle sessions leave memory and come back whole from
their logs, caches hold a stated number of entries, a default start imports no optional library."""

from __future__ import annotations

import gc
import json
import subprocess
import sys
import time
from pathlib import Path

from clawgate.agent.context.builder import ContextBuilder
from clawgate.agent.providers.base import ModelRequest
from clawgate.agent.providers.body import BodyEncoder
from clawgate.agent.session import SessionManager
from tests.fakes.anthropic_api import error, text
from tests.harness import ROOT, DaemonProcess
from tests.waiting import wait_until

OPTIONAL_LIBRARIES = ("discord", "slack_sdk", "nio", "imapclient", "aiosmtplib", "redis", "mcp",
                     "playwright", "ddgs", "primp",  # the browser and web_search load theirs on first use
                     "jinja2")  # hooks' templates: only when a hook is configured


def chat(session_key: str, manager: SessionManager, text: str) -> None:
    session = manager.get(session_key)
    session.append("user", text=text)
    session.append("assistant", content=[{"type": "text", "text": f"answer to {text}"}])


def test_idle_sessions_beyond_the_bound_leave_memory_and_come_back_whole(tmp_path: Path) -> None:
    manager = SessionManager(tmp_path, fsync=False, max_idle=3)
    dropped: list[str] = []
    manager.evicted.append(dropped.append)
    for turn in range(2):
        for n in range(10):
            chat(f"s{n}", manager, f"message {turn} of s{n}")
    gc.collect()
    assert sorted(manager.loaded_keys()) == ["s7", "s8", "s9"]
    # told each time a session left: s0..s6 in both rounds, s7..s9 in the first only
    assert sorted(dropped) == sorted([f"s{n}" for n in range(7)] * 2 + ["s7", "s8", "s9"])
    again = manager.get("s0")  # read back from its log
    assert [m["content"] for m in again.llm_messages()][::2] == [
        [{"type": "text", "text": "message 0 of s0"}], [{"type": "text", "text": "message 1 of s0"}]]
    assert again.seq == 4
    chat("s0", manager, "message 2 of s0")  # appends continue the same log, numbered on
    assert [r["seq"] for r in SessionManager(tmp_path, fsync=False).get("s0").records] == [1, 2, 3, 4, 5, 6]


def test_a_session_in_use_is_never_dropped_nor_duplicated(tmp_path: Path) -> None:
    manager = SessionManager(tmp_path, fsync=False, max_idle=1)
    held = manager.get("busy")  # a running turn holds it
    for n in range(5):
        chat(f"other{n}", manager, "hi")
    gc.collect()
    assert manager.get("busy") is held  # still the same object: one writer per log
    assert "busy" in manager.loaded_keys()


def test_the_record_budget_drops_the_least_recently_used_sessions(tmp_path: Path) -> None:
    manager = SessionManager(tmp_path, fsync=False, max_idle=100, max_idle_records=10)
    for n in range(6):
        chat(f"s{n}", manager, "hi")  # two records each
    manager.get("s6")  # the budget is kept as sessions are taken: 12 records held now, s0 goes
    gc.collect()
    assert sorted(manager.loaded_keys()) == ["s1", "s2", "s3", "s4", "s5", "s6"]


def test_a_forgotten_session_read_again_is_not_told_as_evicted(tmp_path: Path) -> None:
    manager = SessionManager(tmp_path, fsync=False)
    dropped: list[str] = []
    manager.evicted.append(dropped.append)
    old = manager.get("a")
    manager.forget("a")
    new = manager.get("a")
    del old
    gc.collect()
    assert dropped == [] and manager.get("a") is new


def test_every_session_shares_one_frozen_prompt_and_an_evicted_one_forgets_it(tmp_path: Path) -> None:
    (tmp_path / "SOUL.md").write_text("be kind")
    builder = ContextBuilder(tmp_path, tools=list, model="m", max_tokens=100)
    manager = SessionManager(tmp_path / "sessions", fsync=False, max_idle=2)
    manager.evicted.append(builder.invalidate)
    prompts = [builder.system_for(manager.get(f"s{n}"), "normal") for n in range(50)]
    assert all(p is prompts[0] for p in prompts)
    gc.collect()
    assert len(builder._frozen) == 2  # only the sessions still in memory


def test_the_body_encoder_keeps_at_most_its_stated_number_of_sessions() -> None:
    encoder = BodyEncoder(max_sessions=4)
    for n in range(20):
        messages = [{"role": "user", "content": f"hello {n}"}]
        body = encoder.encode(ModelRequest(model="m", system=[], messages=messages, tools=[], max_tokens=10, session_key=f"s{n}"),
                              "m", stream=False)
        assert json.loads(body)["messages"] == messages
    assert list(encoder._sessions) == ["s16", "s17", "s18", "s19"]
    held = encoder._held_bytes
    encoder.forget("s17")  # the session left memory: its entry goes with it
    assert list(encoder._sessions) == ["s16", "s18", "s19"] and encoder._held_bytes < held


async def test_a_default_start_imports_no_channel_library_nor_redis_nor_mcp(daemon_factory) -> None:
    """The real daemon on a fresh `init` home, run with Python's import log on (`-X importtime`, as the
    environment variable): through start-up, a reply, and the model SDK's import after ready, none of what
    only a configured channel, a fleet or an MCP server needs is imported, nor the channel kit."""
    daemon = daemon_factory({"PYTHONPROFILEIMPORTTIME": "1"})
    async with daemon.client(events=["chat"]) as client:
        assert (await client.chat("hello", session="imports"))["text"] == "echo: hello"

    def imported() -> set[str]:
        return {line.split("|")[-1].strip() for line in daemon.output if line.startswith("import time:")}

    # the log is the daemon's own and covers the whole start and the SDK's import in the thread after ready
    wait_until(lambda: {"clawgate.gateway.app", "anthropic._base_client"} <= imported(),
               "the import log to show the daemon's modules and the model SDK's base client")
    roots = {name.split(".")[0] for name in imported()}
    assert roots & set(OPTIONAL_LIBRARIES) == set()
    assert not {name for name in imported() if name.startswith("clawgate.channels.kit")}
    assert "clawgate.gateway.hooks_server" not in imported()  # its aiohttp server only with a hook configured


async def test_an_evicted_session_answers_with_its_whole_history_read_from_its_log(daemon_factory, fake_model) -> None:
    daemon = daemon_factory({"CLAWGATE_STATE__SESSIONS_IN_MEMORY": "2"})
    log = daemon.home / "state" / "sessions" / "kept.jsonl"
    async with daemon.client() as client:
        for n in range(3):
            assert (await client.chat(f"first {n}", session="kept"))["text"] == f"echo: first {n}"
        for n in range(6):  # pushes "kept" out of memory
            await client.chat("hello", session=f"other-{n}")
        # A turn added to the log meanwhile (as a restored checkpoint would): seen only if the log is read again.
        with log.open("a") as fh:
            for seq, record in ((7, {"kind": "user", "text": "noted while away", "owner": True, "user": ""}),
                                (8, {"kind": "assistant", "content": [{"type": "text", "text": "echo: noted while away"}]})):
                fh.write(json.dumps({"seq": seq, "ts": time.time(), **record}) + "\n")
        final = await client.chat("after the others", session="kept")
    assert final["state"] == "final" and final["text"] == "echo: after the others"
    sent = [json.dumps(m["content"]) for m in fake_model.requests[-1]["messages"]]
    expected = ["first 0", "echo: first 0", "first 1", "echo: first 1", "first 2", "echo: first 2", "noted while away",
                "echo: noted while away", "after the others"]
    assert [n for n in expected if any(n in m for m in sent)] == expected
    seqs = [json.loads(line)["seq"] for line in log.read_text().splitlines()]
    assert seqs == list(range(1, len(seqs) + 1))  # the log was continued, numbered on


def test_the_provider_loads_only_the_sdk_modules_a_message_needs_and_the_whole_sdk_when_asked(fake_model) -> None:
    """A streamed answer and an error answer through the SDK's client, in a fresh interpreter: the
    SDK's Vertex/Bedrock clients and its resources (which define every type) stay unimported; a
    public top-level name still gives the whole SDK."""
    script = f"""
import asyncio, json, sys
from clawgate.agent.providers.anthropic import AnthropicProvider
from clawgate.agent.providers.base import ModelRequest, ProviderError
from clawgate.config.schema import AnthropicSettings
provider = AnthropicProvider(AnthropicSettings(api_key="test", base_url={fake_model.base_url!r}, max_retries=0))
request = ModelRequest(model="claude-test", system=[{{"type": "text", "text": "s"}}],
                       messages=[{{"role": "user", "content": "say hi"}}])
async def main():
    answer = (await provider.complete(request)).text
    try:
        await provider.complete(request)
    except ProviderError as exc:
        error = str(exc)
    await provider.close()
    return answer, error
answer, error = asyncio.run(main())
light = sorted(m for m in ("anthropic.lib.vertex", "anthropic.resources.beta", "anthropic.resources.messages")
               if m in sys.modules)
import anthropic
whole = anthropic.Anthropic.__name__, anthropic.types.Message.__name__, "anthropic.lib.vertex" in sys.modules
print(json.dumps([answer, error, light, whole]))
"""
    fake_model.enqueue(text("hi there"), error(400, message="bad request"))
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    answer, error_text, light, whole = json.loads(done.stdout.strip().splitlines()[-1])
    assert answer == "hi there" and "bad request" in error_text
    assert light == []
    assert whole == ["Anthropic", "Message", True]


def test_the_channels_listing_loads_no_adapter_for_a_section_without_accounts(tmp_path: Path) -> None:
    """`clawgate channels` on a fresh `init` home (Telegram's section is always there, without a token) imports
    no channel library: a section that is its one account is listed from the config alone (it used to import
    python-telegram-bot, about half the command's CPU). A section with accounts loads its adapter to split them."""
    home = DaemonProcess(tmp_path / "home", anthropic_url=None, env={"PYTHONPROFILEIMPORTTIME": "1"})
    home.init()

    def listing() -> tuple[list[dict], set[str]]:
        done = home.cli("channels", "--json", timeout=60)
        assert done.returncode == 0, done.stderr
        imported = {line.split("|")[-1].strip() for line in done.stderr.splitlines() if line.startswith("import time:")}
        assert "clawgate.gateway.cli" in imported  # the import log is this command's own
        return json.loads(done.stdout), {name.split(".")[0] for name in imported}

    rows, roots = listing()
    assert {"telegram", "discord", "slack_sdk", "nio", "lark_oapi"} & roots == set()
    assert next(r for r in rows if r["name"] == "telegram")["enabled"] is False
    home.env["CLAWGATE_CHANNELS__TELEGRAM__ACCOUNTS"] = '{"work": {"token": "1:x"}}'
    rows, roots = listing()
    assert "telegram" in roots and next(r for r in rows if r["name"] == "telegram.work")["enabled"] is True
