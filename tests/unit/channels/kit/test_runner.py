"""The runner keeps a channel's failures to that channel: retried with backoff, failed for good on bad
credentials, and one raising adapter never stops another. Injected sleeps, no network."""

from __future__ import annotations

from clawgate.channels.kit import ChannelAuthError, ChannelUnavailable
from clawgate.channels.kit.runner import ChannelRunner
from tests.unit.channels.kit.support import Sleeps, make_kit, settle


async def test_an_unreachable_platform_is_retried_with_backoff_until_it_answers() -> None:
    kit, adapter, _ = make_kit()
    adapter.connect_script = [ChannelUnavailable("down"), ChannelUnavailable("down"), OSError("reset"), None]
    sleeps = Sleeps()
    runner = ChannelRunner(adapter, kit, backoff_base=1.0, backoff_max=3.0, sleep=sleeps)
    await runner.start()
    await settle(lambda: runner.status()["state"] == "running", "the channel running")
    assert adapter.connects == 4 and sleeps.asked == [1.0, 2.0, 3.0] and runner.connected
    await runner.close()
    assert runner.status()["state"] == "stopped"


async def test_a_rejected_token_fails_the_channel_with_its_line_and_is_not_retried(caplog) -> None:
    kit, adapter, _ = make_kit()
    adapter.connect_script = [ChannelAuthError("the token was rejected; set channels.memory.token")]
    sleeps = Sleeps()
    runner = ChannelRunner(adapter, kit, sleep=sleeps)
    await runner.start()
    await settle(lambda: runner.status()["state"] == "failed", "the channel failed")
    status = runner.status()
    assert status["reason"] == "the token was rejected; set channels.memory.token"
    assert adapter.connects == 1 and sleeps.asked == []
    lines = [r.getMessage() for r in caplog.records if "channel memory failed" in r.getMessage()]
    assert len(lines) == 1 and "\n" not in lines[0]
    await runner.close()
    assert runner.status()["state"] == "failed"  # stays failed: the reason is still what matters


async def test_a_bug_in_run_is_retried_and_another_channel_keeps_running() -> None:
    kit, broken, _ = make_kit("broken")
    broken.run_script = [RuntimeError("bug in the handler"), RuntimeError("again")]
    other_kit, other, _ = make_kit("other")
    runners = [ChannelRunner(broken, kit, sleep=Sleeps()), ChannelRunner(other, other_kit, sleep=Sleeps())]
    for runner in runners:
        await runner.start()
    await settle(lambda: broken.runs == 3, "the broken channel reconnected twice")
    await settle(lambda: runners[0].status()["state"] == "running", "the broken channel running again")
    assert runners[1].status()["state"] == "running" and other.runs == 1  # never disturbed
    for runner in runners:
        await runner.close()


async def test_a_problem_the_adapter_reports_shows_as_retrying() -> None:
    kit, adapter, _ = make_kit()
    runner = ChannelRunner(adapter, kit, sleep=Sleeps())
    await runner.start()
    await settle(lambda: runner.status()["state"] == "running", "running")
    kit.report_problem("getUpdates failed (connection refused)")
    assert runner.status()["state"] == "retrying" and "connection refused" in runner.status()["reason"]
    kit.report_problem(None)
    assert runner.status()["state"] == "running" and "reason" not in runner.status()
    await runner.close()
