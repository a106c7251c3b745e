"""The per-agent lookups gateway/agent_scope.py installs, by session key: the check models, exec's allowlist
and the approval mode (each agent's own where it sets one, else the daemon's)."""

from __future__ import annotations

from pathlib import Path

from clawgate.config.agents import AgentConfig, AgentToolPolicy, Roster, resolve
from clawgate.config.schema import AgentSettings
from clawgate.gateway.agent_scope import approval_mode, check_model, exec_allowlist


def _roster(tmp_path: Path) -> Roster:
    agents = {"home": AgentConfig(default=True),
              "work": AgentConfig(model="work-model", drift_model="work-drift",
                                  tools=AgentToolPolicy(exec_allowlist=[], approval_mode="deny")),
              "ops": AgentConfig(model="ops-model")}
    return Roster(resolve(agents, home=tmp_path, default_workspace=tmp_path / "workspace"))


def test_a_check_model_is_the_agents_own_then_the_daemons_then_the_agents_model(tmp_path: Path) -> None:
    roster, agent = _roster(tmp_path), AgentSettings(model="daemon-model")
    drift = check_model(roster, agent, None, "drift_model")
    assert drift("agent:work:main") == "work-drift"
    assert drift("agent:ops:telegram:42") == "ops-model"
    assert drift("sub-abc@agent:ops:main") == "ops-model"  # a sub-agent: its parent's agent
    assert drift("main") == "daemon-model"
    cheap = check_model(roster, agent, "cheap-model", "drift_model")
    assert cheap("agent:work:main") == "work-drift" and cheap("agent:ops:main") == "cheap-model"
    assert check_model(roster, agent, None, "completeness_model")("agent:work:main") == "work-model"


def test_exec_allowlist_and_approval_mode_are_the_agents_own_where_set(tmp_path: Path) -> None:
    roster = _roster(tmp_path)
    assert exec_allowlist(roster)("agent:work:main") == ([], "agents.work.tools.exec_allowlist")
    assert exec_allowlist(roster)("agent:ops:main") is None and exec_allowlist(roster)("main") is None
    assert approval_mode(roster)("agent:work:main") == ("deny", "agents.work.tools.approval_mode")
    assert approval_mode(roster)("main") is None
