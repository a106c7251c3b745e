"""20 sessions x 20 messages at once: per-session order holds and sessions really overlap."""

from __future__ import annotations

import asyncio
import threading
import time

from tests.fakes.anthropic_api import last_user_block, text


async def test_sessions_run_concurrently_and_each_stays_in_order(daemon_factory, fake_model):
    lock = threading.Lock()
    in_flight = 0
    peak = 0
    sessions_in_flight: set[str] = set()
    overlap_seen = False

    def responder(body):
        nonlocal in_flight, peak, overlap_seen
        said = last_user_block(body)
        session = said.split("-")[0]
        with lock:
            if session in sessions_in_flight:
                raise AssertionError(f"two model calls of session {session} overlapped")
            sessions_in_flight.add(session)
            in_flight += 1
            peak = max(peak, in_flight)
            overlap_seen = overlap_seen or in_flight > 1
        time.sleep(0.02)
        with lock:
            in_flight -= 1
            sessions_in_flight.discard(session)
        return text("echo: " + said)

    fake_model.responder = responder
    daemon = daemon_factory({"CLAWGATE_AGENT__MAX_CONCURRENT": "8", "CLAWGATE_AGENT__STREAM": "false"})

    async def one_session(n: int) -> list[str]:
        session = f"s{n}"
        async with daemon.client() as client:
            for m in range(20):
                await client.request("chat.send", {"session": session, "text": f"{session}-m{m}"})
            finals: list[str] = []
            async for frame in client.events():
                payload = frame["payload"]
                if frame["event"] == "chat" and payload["state"] == "final":
                    finals.append(payload["text"])
                    if len(finals) == 20:
                        return finals
        return finals

    results = await asyncio.wait_for(asyncio.gather(*(one_session(n) for n in range(20))), 120)
    for n, finals in enumerate(results):
        assert finals == [f"echo: s{n}-m{m}" for m in range(20)]
    assert not fake_model.responder_errors
    assert overlap_seen and peak > 1
    assert peak <= 8, "the global concurrency cap was exceeded"
