"""`clawgate agents`: edits of config.toml (kept as written, refused in one line with nothing written),
listings from the files or from the running daemon, and a config changed under a running daemon."""

from __future__ import annotations

import json
from collections.abc import Callable

from tests.harness import DaemonProcess


def test_agents_are_added_bound_listed_and_refused_in_one_line_with_and_without_the_daemon(
        daemon_factory: Callable[..., DaemonProcess]) -> None:
    daemon = daemon_factory()
    daemon.terminate()
    config = daemon.home / "config.toml"
    written = config.read_text()
    assert daemon.cli("agents", "add", "work").returncode == 0
    bound = daemon.cli("agents", "bind", "work", "--channel", "discord", "--guild", "77")
    assert bound.returncode == 0 and "bound work <- channel=discord guild=77" in bound.stdout
    refused = daemon.cli("agents", "bind", "main", "--guild", "77", "--channel", "discord")
    assert refused.returncode == 1 and refused.stderr.count("\n") == 1 and "Traceback" not in refused.stderr
    assert "bindings[0] (work <- channel=discord guild=77) and bindings[1] (main <- channel=discord guild=77)" \
        in refused.stderr
    text = config.read_text()
    assert text.startswith(written) and "[agents.main]\ndefault = true" in text  # what was there is kept as written
    assert "main <- " not in text and 'match = {channel = "discord", guild = "77"}' in text
    offline = json.loads(daemon.cli("agents", "list", "--json").stdout)
    assert offline["daemon"] is False
    assert [(a["id"], a["default"], a["bindings"]) for a in offline["agents"]] == [
        ("main", True, []), ("work", False, ["work <- channel=discord guild=77"])]
    assert offline["agents"][1]["workspace"] == str(daemon.home / "agents" / "work" / "workspace")

    daemon.start()
    live = json.loads(daemon.cli("agents", "list", "--json").stdout)
    assert live["daemon"] is True and live["configChanged"] is False and live["agents"] == offline["agents"]
    assert daemon.cli("agents", "unbind", "0").returncode == 0  # the daemon keeps routing as it started
    after = daemon.cli("agents", "bindings")
    assert "0  work   channel=discord guild=77" in after.stdout and "has changed since the daemon started" in after.stdout
    gone = daemon.cli("agents", "remove", "nobody")
    assert gone.returncode == 1 and gone.stderr.strip() == \
        "clawgate: no agent 'nobody' in config.toml; `clawgate agents list` shows them"
    status = json.loads(daemon.cli("status", "--json").stdout)
    assert status["agents"] == ["main", "work"]


def test_agents_list_names_where_each_agents_heartbeat_news_goes(
        daemon_factory: Callable[..., DaemonProcess]) -> None:
    agents = {"home": {"default": True}, "work": {}, "ops": {"heartbeat_deliver": "gateway:ops-news"}}
    daemon = daemon_factory({"CLAWGATE_AGENTS": json.dumps(agents), "CLAWGATE_HEARTBEAT__DELIVER": "none"})
    expected = [("home", "none", "heartbeat.deliver"), ("work", "last", "default"),
                ("ops", "gateway:ops-news", "agents.ops.heartbeat_deliver")]
    live = json.loads(daemon.cli("agents", "list", "--json").stdout)
    assert live["daemon"] is True
    assert [(a["id"], a["heartbeatDeliver"], a["heartbeatDeliverSetting"]) for a in live["agents"]] == expected
    table = daemon.cli("agents", "list").stdout.splitlines()
    assert table[0].split() == ["AGENT", "DEFAULT", "HEARTBEAT", "WORKSPACE", "BINDINGS"]
    assert [line.split()[:3] for line in table[1:4]] == [["home", "yes", "none"], ["work", "last", str(
        daemon.home / "agents" / "work" / "workspace")], ["ops", "gateway:ops-news", str(
            daemon.home / "agents" / "ops" / "workspace")]]
    daemon.terminate()
    offline = json.loads(daemon.cli("agents", "list", "--json").stdout)
    assert offline["daemon"] is False and offline["agents"] == live["agents"]
