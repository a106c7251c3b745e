"""Side by side in one run: clawgate's round trip against nanobot 0.3.5's (HKUDS/nanobot, PyPI nanobot-ai).

Usage: python bench/nanobot_compare.py [--messages 200] [--block 10] [--warmup 10]
The first run creates bench/.venv-nanobot and pip-installs nanobot-ai==0.3.5 there (reused after).

What is measured on each side, per message:
- clawgate: the real `clawgate gateway` process; the time from sending `chat.send` on its WebSocket
  to receiving that run's `final` chat event, which carries the whole reply. The client connects
  as a plain chat client (`events: ["chat"]`: reply deltas and finals, no dashboard events).
- nanobot: the real `nanobot gateway` process (0.3.5) with its WebSocket channel (on by default,
  127.0.0.1); the time from sending the message frame to receiving `stream_end`, the frame at which
  the whole reply is at the client. Its `turn_end` comes 1-3 ms later and is shown as its own row;
  the ratio uses `stream_end`, the earlier of the two, so it never flatters clawgate.

Why the two numbers are comparable:
- both are long-lived daemons started once, each a separate process, driven over a WebSocket on
  127.0.0.1 by this one process with the same client library (websockets); no per-message start-up;
- one fake Messages API process (tests/fakes/anthropic_api.py: zero latency, streams an echo of
  the last user message) serves both, through each side's real `anthropic` SDK;
- the same sessions: a fresh session for every block of --block messages, round trips sequential,
  so both sides see the same history lengths (0 .. block-1 earlier turns); nanobot gets a fresh
  session by a fresh connection (one connection = one chat), which is opened outside the timing;
- blocks alternate between the two (and which side goes first), so machine load falls on both alike;
- persistence on for both: clawgate with `state.fsync = true` (its default); nanobot with its own
  session persistence as it ships (its JSONL session file rewritten every turn, without fsync);
- everything else as each ships: default config except the model endpoint, ports and token (for
  clawgate this puts back drift control and the completeness check that the test harness turns off;
  a one-call reply gives neither a reason to call the model), each logging at its default level
  (info); each makes exactly one model request per message (checked by counting the fake's
  requests) and sends its own full system prompt and tool set, as it would to a real model (at
  the 10th message of a session: nanobot 33 KB with 23 tools, clawgate 17 KB with 14 tools);
- nanobot's tiktoken encoding is put in its cache first (bench/nanobot_side.py says why): without
  it, this offline machine would make nanobot retry a download every turn, which it never does
  where there is internet.

The goal checked: clawgate's p50 at least 20x below nanobot's.
If nanobot cannot be installed or started here, the script prints one line saying why and exits 2.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from core_bench import pct, start_fake_model  # noqa: E402  (also puts the repo root on sys.path)
from nanobot_side import (  # noqa: E402
    NANOBOT_VERSION,
    NanobotGateway,
    Turn,
    Unavailable,
    ensure_venv,
    nanobot_session,
    seed_tiktoken_cache,
)

from clawgate.gateway.client import CHAT_ONLY, GatewayClient  # noqa: E402
from tests.harness import TOKEN, DaemonProcess, free_port  # noqa: E402

GOAL_RATIO = 20.0
NANOBOT = f"nanobot {NANOBOT_VERSION}"


async def clawgate_session(client: GatewayClient, session: str, texts: list[str]) -> list[float]:
    """Sequential round trips in one clawgate session; checks each reply really is the echo."""
    out = []
    for text in texts:
        started = time.perf_counter()
        try:
            payload = await asyncio.wait_for(client.chat(text, session=session), 120)
        except asyncio.TimeoutError:
            raise RuntimeError(f"clawgate did not answer {text!r} within 120 s") from None
        out.append((time.perf_counter() - started) * 1000)
        if payload.get("state") != "final" or text not in (payload.get("text") or ""):
            raise RuntimeError(f"clawgate turn for {text!r} failed: {payload}")
    return out


async def interleave(claw_url: str, nano_url: str, blocks: int, block: int,
                     warmup: int) -> tuple[list[float], list[Turn]]:
    """Warm both up, then alternate blocks (one fresh session each) between the two sides."""
    claw: list[float] = []
    nano: list[Turn] = []
    async with GatewayClient(claw_url, TOKEN, events=CHAT_ONLY) as client:
        if warmup:
            texts = [f"warm-up {i}" for i in range(warmup)]
            await clawgate_session(client, "compare-warmup", texts)
            await nanobot_session(nano_url, texts)
        for b in range(blocks):
            texts = [f"ping {b}-{i}" for i in range(block)]

            async def run_claw() -> None:
                claw.extend(await clawgate_session(client, f"compare-{b}", texts))

            async def run_nano() -> None:
                nano.extend(await nanobot_session(nano_url, texts))

            for side in ((run_claw, run_nano) if b % 2 == 0 else (run_nano, run_claw)):
                await side()
    return claw, nano


def comparison_rows(claw: list[float], nano: list[float], nano_end: list[float]) -> list[tuple[str, str, str, str]]:
    """(measure, clawgate, nanobot, nanobot / clawgate) rows; the ratio is how many times faster clawgate is."""
    rows = []
    for name, q in (("p50", 0.5), ("p90", 0.9), ("p99", 0.99)):
        a, b = pct(claw, q), pct(nano, q)
        rows.append((f"round trip {name}", f"{a:.1f} ms", f"{b:.1f} ms", f"{b / a:.1f}x"))
    a, b = sum(claw) / len(claw), sum(nano) / len(nano)
    rows.append(("round trip mean", f"{a:.1f} ms", f"{b:.1f} ms", f"{b / a:.1f}x"))
    rows.append(("nanobot to turn_end p50", "", f"{pct(nano_end, 0.5):.1f} ms", ""))
    return rows


def verdict(claw: list[float], nano: list[float], goal: float = GOAL_RATIO) -> str:
    ratio = pct(nano, 0.5) / pct(claw, 0.5)
    met = "met" if ratio >= goal else "not met"
    return f"goal: clawgate p50 at least {goal:.0f}x below nanobot's -> {ratio:.1f}x, {met}"


def format_table(rows: list[tuple[str, str, str, str]], cell: int = 13) -> str:
    """A Markdown table in the style of the other bench scripts, pasteable into the README."""
    head = ("measure", "clawgate", NANOBOT, "nanobot/clawgate")
    width = max(len(r[0]) for r in [head, *rows])
    cells = [max(cell, len(head[i])) for i in range(1, 4)]

    def line(r: tuple[str, str, str, str]) -> str:
        return f"| {r[0]:{width}} | " + " | ".join(f"{v:>{w}}" for v, w in zip(r[1:], cells)) + " |"

    sep = f"|{'-' * (width + 2)}|" + "|".join("-" * (w + 2) for w in cells) + "|"
    return "\n".join([line(head), sep, *(line(r) for r in rows)])


def run(args: argparse.Namespace) -> int:
    executable = ensure_venv(Path(args.venv).resolve())
    tiktoken_cache = seed_tiktoken_cache(Path(args.venv).resolve())
    blocks = max(1, -(-args.messages // args.block))
    load_before = os.getloadavg()
    fake, fake_url = start_fake_model()
    try:
        with tempfile.TemporaryDirectory() as claw_home, tempfile.TemporaryDirectory() as nano_home:
            env = {"CLAWGATE_STATE__FSYNC": "true", "CLAWGATE_DRIFT__ENABLED": "true",
                   "CLAWGATE_REFLECTION__ENABLED": "true"}
            daemon = DaemonProcess(Path(claw_home), anthropic_url=fake_url, env=env)
            daemon.init()
            daemon.start(timeout=60)
            nanobot = NanobotGateway(executable, tiktoken_cache, Path(nano_home), fake_url,
                                     ws_port=free_port(), health_port=free_port())
            try:
                nanobot.start()
                claw, nano = asyncio.run(interleave(daemon.url, nanobot.url, blocks, args.block, args.warmup))
            finally:
                nanobot.stop()
                if daemon.alive():
                    daemon.terminate()
    finally:
        fake.terminate()
        fake.wait(10)
    load_after = os.getloadavg()
    print(f"clawgate vs {NANOBOT}, side by side: {len(claw)} messages each in {blocks} alternating blocks of "
          f"{args.block} (one fresh session per block), {args.warmup} warm-up each; zero-latency fake model, "
          f"{os.cpu_count()} cores, load average {load_before[0]:.1f} before / {load_after[0]:.1f} after")
    print(format_table(comparison_rows(claw, [t.reply_ms for t in nano], [t.end_ms for t in nano])))
    print(verdict(claw, [t.reply_ms for t in nano]))
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=200, help="measured messages per side (rounded up to whole blocks)")
    parser.add_argument("--block", type=int, default=10, help="messages per block; each block is one fresh session")
    parser.add_argument("--warmup", type=int, default=10, help="unmeasured messages per side first, in a session of their own")
    parser.add_argument("--venv", default=str(HERE / ".venv-nanobot"), help="where nanobot's own venv is kept")
    args = parser.parse_args()
    if args.messages < 1 or args.block < 1 or args.warmup < 0:
        parser.error("--messages and --block must be at least 1, --warmup at least 0")
    try:
        return run(args)
    except Unavailable as exc:
        print(f"nanobot_compare: {exc}")
        return 2
    except RuntimeError as exc:  # a turn that did not come back as the echo: the figures would mean nothing
        print(f"nanobot_compare: {exc}")
        return 1


if __name__ == "__main__":
    sys.exit(main())
