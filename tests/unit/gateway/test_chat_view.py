"""What `clawgate chat` prints for a stream of gateway events (gateway/cli/chat_view.py), without a
daemon: whole lines above the prompt, each answer once however often a resume hands it over, and
answers the terminal did not ask for labelled with where they came from."""

from __future__ import annotations

from typing import Any

import pytest

from clawgate.gateway.cli.chat_view import ChatView


def chat(run: str, state: str, text: str = "", **more: Any) -> dict[str, Any]:
    return {"event": "chat", "payload": {"session": "main", "runId": run, "state": state, "text": text, **more}}


def agent(run: str, stream: str, **more: Any) -> dict[str, Any]:
    return {"event": "agent", "payload": {"session": "main", "runId": run, "stream": stream, **more}}


async def test_lines_are_printed_whole_and_the_final_answer_is_not_repeated(capsys: pytest.CaptureFixture[str]) -> None:
    view = ChatView("main", raw=False, label=True)
    run = view.expect("r1")
    for frame in (chat("r1", "delta", "Hello, wo"), chat("r1", "delta", "rld.\nSecond"), agent("r1", "turn_end"),
                  agent("r1", "tool_start", tool="exec", summary="{}"), agent("r1", "tool_end", tool="exec",
                  status="failed", duration_ms=3), chat("r1", "delta", "Done."), agent("r1", "turn_end"),
                  chat("r1", "final", "Done.", seq=1, kind="reply")):
        view.on_event(frame)
    out, err = capsys.readouterr()
    assert out.splitlines() == ["agent> Hello, world.", "Second", "Done."]
    assert "✗ exec failed (3 ms)" in err and "✓" not in err
    assert run.done.done() and not view.busy()


async def test_a_reply_handed_over_again_is_shown_once_and_foreign_ones_are_labelled(
        capsys: pytest.CaptureFixture[str]) -> None:
    seen: list[int] = []
    view = ChatView("main", raw=False, label=True, on_reply=seen.append)
    cron = chat("cron:j1:2026", "final", "Stand-up in 5.", seq=4, kind="reply",
                **{"from": {"kind": "cron", "name": "stand-up", "schedule": "every 1h"}})
    other = chat("in_x", "final", "For the other client.", seq=5, kind="reply")
    for frame in (cron, other, cron, other):  # a resume that overlaps what arrived live
        view.on_event(frame)
    out, err = capsys.readouterr()
    assert out.splitlines() == ["agent> Stand-up in 5.", "agent> For the other client."]
    assert '(from cron job "stand-up", every 1h)' in err
    assert "(answer to a message sent from another client)" in err
    assert seen == [4, 5]


async def test_an_answer_cut_by_a_reconnect_is_printed_whole(capsys: pytest.CaptureFixture[str]) -> None:
    view = ChatView("main", raw=True, label=False)
    view.expect("r1")
    view.on_event(chat("r1", "delta", "Partial"))
    view.on_event(chat("r1", "delta", "", restart=True))  # a retried model call: the preview starts again
    view.on_event(chat("r1", "final", "The whole answer.", seq=2, kind="reply"))
    out, err = capsys.readouterr()
    assert out == "Partial\nThe whole answer.\n"
    assert "broke off" in err


async def test_a_one_message_chat_keeps_stdout_for_its_own_answer(capsys: pytest.CaptureFixture[str]) -> None:
    view = ChatView("main", raw=True, label=False)
    view.expect("r1")
    view.on_event(chat("cron:j1:2026", "final", "A cron result.", seq=3, kind="reply"))
    view.on_event(chat("r1", "delta", "Mine."))
    view.on_event(chat("r1", "final", "Mine.", seq=4, kind="reply"))
    out, err = capsys.readouterr()
    assert out == "Mine.\n"
    assert '(from cron job "j1")' in err and "agent> A cron result." in err


def test_a_webhooks_answer_is_labelled_with_the_hook() -> None:
    from clawgate.gateway.cli.chat_view import source_label

    assert source_label({"from": {"kind": "hook", "name": "ci", "delivery": "d-1"}, "runId": "hook:ci:d-1"}) == \
        'from webhook "ci"'
    assert source_label({"runId": "hook:deploy:abc"}) == 'from webhook "deploy"'
