"""[agents.*] and [[bindings]]: what a config may say, the one-line refusals, and which binding wins."""

from __future__ import annotations

from pathlib import Path

import pytest

from clawgate.config.agents import IMPLICIT_AGENT, AgentConfig, Place, choose, resolve
from clawgate.config.loader import ConfigError, agents_of, load


def _load(home: Path, text: str):
    (home / "config.toml").write_text(text)
    return load(home, environ={})


def test_no_agents_section_is_the_single_agent_of_before(tmp_path):
    paths, settings = load(tmp_path, environ={})
    agents = agents_of(paths, settings)
    assert list(agents) == [IMPLICIT_AGENT]
    only = agents[IMPLICIT_AGENT]
    assert only.default and only.workspace == tmp_path / "workspace"
    assert only.session_key("telegram:42") == "telegram:42"  # keys unchanged: nothing migrates


def test_the_default_agent_keeps_the_old_workspace_and_the_others_get_their_own(tmp_path):
    paths, settings = _load(tmp_path, '[agents.family]\n[agents.home]\ndefault = true\n')
    agents = agents_of(paths, settings)
    assert list(agents) == ["home", "family"]  # the default first
    assert agents["home"].workspace == tmp_path / "workspace"
    assert agents["family"].workspace == tmp_path / "agents" / "family" / "workspace"
    named = resolve({"w": AgentConfig(workspace="~/w")}, home=tmp_path, default_workspace=tmp_path / "x")
    assert named["w"].workspace == Path("~/w").expanduser()
    assert agents["home"].session_key("discord:9") == "discord:9"
    assert agents["family"].session_key("discord:9") == "agent:family:discord:9"


@pytest.mark.parametrize("text,expected", [
    ('[agents.a]\n[agents.b]\n', "exactly one [agents.<id>] needs default = true, but none is marked"),
    ('[agents.a]\ndefault = true\n[agents.b]\ndefault = true\n', "a, b are all marked"),
    ('[agents.Work]\ndefault = true\n', "agent id 'Work' is not valid"),
    ('[agents.a]\ndefault = true\n[[bindings]]\nagent = "ghost"\nmatch = { channel = "telegram" }\n',
     "bindings[0] names agent 'ghost', which has no [agents.ghost] section"),
    ('[[bindings]]\nagent = "main"\nmatch = { guild = "1", roles = ["2"] }\n'
     '[[bindings]]\nagent = "main"\nmatch = { guild = "1", roles = ["3"] }\n',
     "bindings[0] (main <- guild=1 roles=2) and bindings[1] (main <- guild=1 roles=3) match the same messages"),
    ('[agents.a]\ndefault = true\n[agents.b]\n[[bindings]]\nagent = "a"\nmatch = { channel = "telegram", peer = "5" }\n'
     '[[bindings]]\nagent = "b"\nmatch = { peer = "5", channel = "telegram" }\n', "match the same messages equally"),
    ('[[bindings]]\nagent = "main"\nmatch = { roles = ["3"] }\n', "matches Discord roles without a guild"),
    ('[agents.a]\ndefault = true\nmodle = "x"\n', "unknown key 'agents.a.modle'"),
    ('[agents.a]\ndefault = true\n[agents.b]\nowners = ["42"]\n', "agents.b.owners has '42', which is not"),
    ('[agents.a]\ndefault = true\n[agents.b.tools]\nmcp_servers = ["ghost"]\n',
     "agents.b.tools.mcp_servers names 'ghost', which has no [mcp.servers.ghost] section; use one of: (none configured)"),
    ('[agents.a]\ndefault = true\n[agents.b.tools]\napproval_mode = "sometimes"\n', "agents.b.tools.approval_mode"),
    ('[[bindings]]\nagent = "main"\nmatch = { chanel = "telegram" }\n', "unknown key 'bindings.0.match.chanel'"),
])
def test_a_wrong_agents_or_bindings_config_is_one_line_naming_the_fix(tmp_path, text, expected):
    with pytest.raises(ConfigError) as info:
        _load(tmp_path, text)
    message = str(info.value)
    assert expected in message and "\n" not in message, message


def test_owners_whose_user_ids_hold_colons_are_taken_whole(tmp_path):
    """Matrix, Teams and DingTalk user ids have colons of their own: the channel is what comes before the first."""
    paths, settings = _load(tmp_path, '[agents.a]\ndefault = true\n[agents.b]\n'
                                      'owners = ["matrix:@alice:example.org", "teams.work:29:1abc", "dingtalk:$:LWCP_v1:$x"]\n')
    b = agents_of(paths, settings)["b"]
    assert b.owned_by("matrix", "@alice:example.org") and b.owned_by("matrix.home", "@alice:example.org")
    assert b.owned_by("teams.work", "29:1abc") and not b.owned_by("teams", "29:1abc")
    assert b.owned_by("dingtalk", "$:LWCP_v1:$x") and not b.owned_by("matrix", "@alice")


def test_an_unknown_agent_is_named_in_the_environment_too(tmp_path):
    with pytest.raises(ConfigError, match="names agent 'nope'"):
        load(tmp_path, environ={"CLAWGATE_BINDINGS": '[{"agent": "nope", "match": {"channel": "slack"}}]'})


def test_the_most_specific_binding_wins_whatever_the_order(tmp_path):
    _, settings = _load(tmp_path, """
[agents.home]
default = true
[agents.work]
[agents.guild]
[agents.boss]
[[bindings]]
agent = "work"
match = { channel = "telegram", account = "work" }
[[bindings]]
agent = "boss"
match = { channel = "discord", guild = "G", roles = ["admin"] }
[[bindings]]
agent = "guild"
match = { channel = "discord", guild = "G" }
[[bindings]]
agent = "home"
match = { channel = "telegram", account = "work", peer = "123" }
""")
    route = lambda place: choose(settings.bindings, place, "home")  # noqa: E731
    assert route(Place("telegram", "work", peer="7")) == "work"
    assert route(Place("telegram", "work", peer="123")) == "home"  # a peer beats an account
    assert route(Place("telegram", "default", peer="7")) == "home"  # no binding: the default
    assert route(Place("discord", peer="c1", guild="G")) == "guild"
    assert route(Place("discord", peer="c1", guild="G", roles=frozenset({"admin", "x"}))) == "boss"
    assert route(Place("discord", peer="u1")) == "home"  # a DM is in no guild
    assert route(Place("discord", peer="c1", guild="H")) == "home"


def test_a_session_and_its_sub_agents_and_cron_jobs_belong_to_the_agent_in_its_key():
    from clawgate.agent.triggers.jobs import build_schedule, new_job
    from clawgate.config.agents import agent_id_of

    assert agent_id_of("telegram:42") is None and agent_id_of("agent:work:telegram:42") == "work"
    assert agent_id_of("sub-ab12@sub-cd34@agent:work:main") == "work"  # a sub-agent's: its parent's agent
    assert agent_id_of("agent:Bad:x") is None and agent_id_of("agent:work:") is None  # not an agent's key
    schedule = build_schedule(cron=None, tz=None, every="1h", at=None, now=0.0)
    job = new_job(message="report", schedule=schedule, grace_seconds=60, agent="work")
    assert job.session == f"agent:work:cron:{job.id}"
    named = new_job(message="report", schedule=schedule, grace_seconds=60, session="daily", agent="work")
    assert named.session == "agent:work:daily"
    already = new_job(message="r", schedule=schedule, grace_seconds=60, session="agent:work:daily", agent="work")
    assert already.session == "agent:work:daily"
    assert new_job(message="r", schedule=schedule, grace_seconds=60).session.startswith("cron:")
