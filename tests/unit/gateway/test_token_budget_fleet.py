"""An agent's daily_tokens with the fleet's count (gateway/agent_scope.py TokenBudget) against a Redis that
is not there: a real client to a loopback port nobody listens on. The process's own count decides, calls
still go ahead under it, and the outage is logged once, not per call."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
import redis.asyncio as aioredis

from clawgate.agent.fleet.counters import SharedCounter
from clawgate.agent.fleet.keys import Keys
from clawgate.agent.usage.ledger import UsageLedger
from clawgate.config.agents import AgentConfig, Roster, resolve
from clawgate.gateway.agent_scope import TokenBudget, token_budget
from tests.harness import free_port


def _budget(tmp_path: Path) -> TokenBudget:
    agents = {"home": AgentConfig(default=True), "work": AgentConfig(daily_tokens=1000)}
    roster = Roster(resolve(agents, home=tmp_path, default_workspace=tmp_path / "workspace"))
    budget = token_budget(roster, UsageLedger(None, today=lambda: "2026-11-29"))
    assert budget is not None
    return budget


async def test_redis_away_falls_back_to_this_processs_count_with_one_warning(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    budget = _budget(tmp_path)
    away = aioredis.Redis(host="127.0.0.1", port=free_port(), socket_connect_timeout=0.5)
    budget.shared = SharedCounter(away, Keys("t-away"))
    caplog.set_level(logging.INFO, logger="clawgate.gateway.agent_scope")
    try:
        assert await budget.refuse("agent:work:telegram:1") is None
        budget.ledger.record("agent:work:telegram:1", {"input_tokens": 700, "output_tokens": 400})
        await budget.spent("agent:work:telegram:1", 1100)
        refusal = await budget.refuse("agent:work:telegram:2")
        assert refusal is not None and "1100 of 1000" in refusal and "\n" not in refusal
        assert await budget.refuse("main") is None  # the default agent sets no budget
    finally:
        await away.aclose()
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "this process's own count" in warnings[0].getMessage()


def test_no_agent_with_a_budget_means_no_budget(tmp_path: Path) -> None:
    roster = Roster(resolve({"home": AgentConfig(default=True)}, home=tmp_path, default_workspace=tmp_path / "w"))
    assert token_budget(roster, UsageLedger(None)) is None
