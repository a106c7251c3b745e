"""send_file in the gateway's own chat (web page, `clawgate chat`): files are delivered to chat platforms
only, so the session gets one `chat` event of kind "file" saying so, and the run's answer stays its answer."""

from __future__ import annotations

from tests.fakes.anthropic_api import FakeAnthropic, text, tool_use
from tests.harness import DaemonProcess


async def test_a_file_in_the_gateway_chat_becomes_a_line_and_its_copy_is_removed(
        daemon: DaemonProcess, fake_model: FakeAnthropic) -> None:
    (daemon.workspace / "data.json").write_bytes(b'{"a": 1}\n')
    fake_model.enqueue(tool_use("send_file", {"path": "data.json"}), text("Done."))
    async with daemon.client() as client:
        ack = await client.request("chat.send", {"session": "main", "text": "send me the data"})
        seen = []
        async for frame in client.events():
            payload = frame["payload"]
            if frame["event"] == "chat" and payload.get("runId") == ack["runId"] and payload["state"] != "delta":
                seen.append(payload)
                if payload.get("kind") != "file":
                    break
    [line, answer] = seen
    assert line["kind"] == "file" and line["text"].startswith("📎 data.json (9 bytes) could not be sent: ")
    assert "files are only delivered to chat platforms" in line["text"] and "\n" not in line["text"]
    assert answer["text"] == "Done."
    outbox = daemon.home / "state" / "outbox-files"
    assert not outbox.exists() or not any(outbox.iterdir())  # the line was delivered before the answer
