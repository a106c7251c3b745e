"""The control page resumes its chat after a lost connection: an answer given while it was away
(and taken by another client meanwhile) still reaches it, once. Headless Chromium, real daemon."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from clawgate.gateway.client import GatewayClient
from tests.fakes.anthropic_api import text
from tests.e2e.test_web_e2e import browser, expect, logged_in  # noqa: F401  (browser: a fixture)
from tests.waiting import wait_until

# Counts the `chat` finals the page's socket receives; while __hold is set, new sockets go nowhere
# (a refused port), as if the network were down.
SOCKETS = """
(() => {
  const Real = window.WebSocket;
  window.__hold = false;
  window.__sockets = [];
  window.__finals = [];
  window.WebSocket = class extends Real {
    constructor(url, protocols) {
      super(window.__hold ? "ws://127.0.0.1:9/" : url, protocols);
      window.__sockets.push(this);
      this.addEventListener("message", (event) => {
        const frame = JSON.parse(event.data);
        if (frame.type === "event" && frame.event === "chat" && frame.payload.state === "final") {
          window.__finals.push(frame.payload);
        }
      });
    }
  };
})();
"""


def test_the_page_resumes_an_answer_given_while_it_was_away(browser, daemon, fake_model):  # noqa: F811
    gate = threading.Event()

    def respond(body: dict[str, Any]):
        gate.wait(120)
        return text("answered while away")

    fake_model.responder = respond
    browser.add_init_script(SOCKETS)
    page = logged_in(browser, daemon)
    other: list[dict[str, Any]] = []

    async def watch(ready: threading.Event) -> None:
        async with GatewayClient(daemon.url, daemon.client_token, subscribe=["main"], open_timeout=60) as client:
            ready.set()
            async for frame in client.events():
                if frame["event"] == "chat" and frame["payload"]["state"] == "final":
                    other.append(frame["payload"])
                    return

    ready = threading.Event()
    watcher = threading.Thread(target=lambda: asyncio.run(watch(ready)), daemon=True)
    watcher.start()
    assert ready.wait(60)

    page.fill("#chat-input", "are you there?")
    page.click("#chat-send")
    wait_until(lambda: len(fake_model.requests) >= 1, "the question to reach the model")
    page.evaluate("window.__hold = true; window.__sockets.at(-1).close()")  # the page loses its connection
    expect(page.locator("#conn-state")).to_contain_text("reconnecting")
    gate.set()
    watcher.join(60)
    assert [p["text"] for p in other] == ["answered while away"]  # delivered, to another client only
    assert page.evaluate("window.__finals.length") == 0

    page.evaluate("window.__hold = false")  # the network is back: the page reconnects and resumes
    expect(page.locator("#conn-state")).to_contain_text("connected ·")
    wait_until(lambda: page.evaluate("window.__finals.length") >= 1, "the resumed answer")
    finals = page.evaluate("window.__finals")
    assert [(f["text"], f["seq"]) for f in finals] == [("answered while away", other[0]["seq"])]
    expect(page.locator("#messages .msg.assistant", has_text="answered while away")).to_have_count(1)
