"""Telegram path bench: per-message overhead, and 100 chats x 5 messages answered exactly once, in order.

Runs the real `clawgate gateway` process, the fake Messages API as its own process (zero
latency, echo responder) and FakeTelegram (real HTTP on 127.0.0.1) in this process; prints a
table. Usage: .venv/bin/python bench/telegram_bench.py [--messages 100] [--chats 100] [--per-chat 5]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.core_bench import pct, start_fake_model, throughput  # noqa: E402
from clawgate.gateway.client import CHAT_ONLY, GatewayClient  # noqa: E402
from tests.fakes.telegram_api import FakeTelegram  # noqa: E402
from tests.harness import TOKEN, DaemonProcess  # noqa: E402


def telegram_round_trips(fake: FakeTelegram, n: int, first_chat: int) -> list[float]:
    """Inject, then wait for the reply: the whole Telegram path, one message at a time."""
    out = []
    for i in range(n):
        chat = first_chat + i // 10  # a fresh chat every 10 messages, like the core bench's sessions
        before = len(fake.sent)
        started = time.perf_counter()
        fake.inject_message(chat, f"ping {i}")
        while not any(m["chat_id"] == chat and m["text"].startswith("echo:") for m in fake.sent[before:]):
            time.sleep(0.0005)
        out.append((time.perf_counter() - started) * 1000)
    return out


async def gateway_round_trips(url: str, n: int) -> list[float]:
    """The same through the gateway WebSocket, a fresh session every 10 messages like the chats above."""
    out = []
    async with GatewayClient(url, TOKEN, events=CHAT_ONLY) as client:
        for i in range(n):
            started = time.perf_counter()
            await client.chat(f"ping {i}", session=f"bench-gw-{i // 10}")
            out.append((time.perf_counter() - started) * 1000)
    return out


def fan_out(fake: FakeTelegram, chats: int, per_chat: int, timeout: float) -> tuple[float, dict[str, int]]:
    """Every chat sends `per_chat` messages at once; check each reply arrives exactly once, in order."""
    base = 20_000
    started = time.perf_counter()
    for m in range(per_chat):
        for c in range(chats):
            fake.inject_message(base + c, f"chat {c} message {m}")
    expected = {base + c: [f"echo: chat {c} message {m}" for m in range(per_chat)] for c in range(chats)}
    deadline = time.monotonic() + timeout
    seen = scanned = 0
    while time.monotonic() < deadline and seen < chats * per_chat:
        time.sleep(0.005)
        new = fake.sent[scanned:]  # scan only what arrived since the last look: cheap, so the fake is not starved
        scanned += len(new)
        seen += sum(1 for m in new if m["chat_id"] in expected)
    elapsed = time.perf_counter() - started
    time.sleep(1.0)  # anything sent twice would show up now
    result = {"in order, exactly once": 0, "duplicated": 0, "missing": 0, "out of order": 0}
    for chat, want in expected.items():
        got = fake.messages_to(chat)
        if got == want:
            result["in order, exactly once"] += 1
        elif len(got) > len(set(got)):
            result["duplicated"] += 1
        elif set(got) != set(want):
            result["missing"] += 1
        else:
            result["out of order"] += 1
    return elapsed, result


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--messages", type=int, default=100, help="sequential round trips per path")
    parser.add_argument("--chats", type=int, default=100)
    parser.add_argument("--per-chat", type=int, default=5)
    parser.add_argument("--fsync", choices=["true", "false"], default="true")
    args = parser.parse_args()
    model, model_url = start_fake_model()
    try:
        with tempfile.TemporaryDirectory() as home, FakeTelegram() as fake:
            env = {"TELEGRAM_BOT_TOKEN": fake.token, "CLAWGATE_CHANNELS__TELEGRAM__BASE_URL": fake.base_url,
                   "CLAWGATE_CHANNELS__TELEGRAM__DM_POLICY": "open", "CLAWGATE_STATE__FSYNC": args.fsync,
                   "CLAWGATE_AGENT__MAX_CONCURRENT": "16", "CLAWGATE_LOG__LEVEL": "warning"}
            daemon = DaemonProcess(Path(home), anthropic_url=model_url, env=env)
            daemon.init()
            daemon.start()
            telegram_round_trips(fake, 5, 9_000)  # warm-up
            asyncio.run(gateway_round_trips(daemon.url, 5))
            tg = telegram_round_trips(fake, args.messages, 10_000)
            gw = asyncio.run(gateway_round_trips(daemon.url, args.messages))
            elapsed, fan = fan_out(fake, args.chats, args.per_chat, timeout=180)
            gw_rate = asyncio.run(throughput(daemon.url, args.chats, args.per_chat))
            daemon.terminate()
    finally:
        model.terminate()
    total = args.chats * args.per_chat
    rows = [
        ("round trip via Telegram, p50", f"{pct(tg, 0.5):.1f} ms"),
        ("round trip via Telegram, p95", f"{pct(tg, 0.95):.1f} ms"),
        ("round trip via gateway WebSocket, p50", f"{pct(gw, 0.5):.1f} ms"),
        ("Telegram path overhead per message (p50 diff)", f"{statistics.median(tg) - statistics.median(gw):.1f} ms"),
        (f"{args.chats} chats x {args.per_chat} messages, all answered in", f"{elapsed:.2f} s"),
        ("  throughput via Telegram", f"{total / elapsed:.0f} msg/s"),
        ("  same load via gateway WebSocket", f"{gw_rate:.0f} msg/s"),
        *((f"  chats: {name}", f"{count}/{args.chats}") for name, count in fan.items()),
    ]
    print(f"clawgate telegram bench (fsync={args.fsync}, zero-latency fake model, FakeTelegram, {os.cpu_count()} cores)")
    width = max(len(r[0]) for r in rows)
    print(f"| {'measure':{width}} | {'result':>12} |")
    print(f"|{'-' * (width + 2)}|{'-' * 14}|")
    for name, value in rows:
        print(f"| {name:{width}} | {value:>12} |")
    ok = fan["in order, exactly once"] == args.chats
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
