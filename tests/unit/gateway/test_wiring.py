"""The composition root as declared: every hook lands at its point in the table's order, nothing
asks the loop before it exists, and the offline parts are the daemon's own stores."""

from __future__ import annotations

import sqlite3

import pytest

from clawgate.agent.supervision.drift_restore import DriftRestore
from clawgate.config.paths import Paths
from clawgate.config.schema import Settings
from clawgate.gateway.app import App
from clawgate.gateway.offline import Offline
from clawgate.gateway.wiring import (SessionActivity, build_approvals, build_conversation, build_model,
                                     build_producers, build_state, build_supervision, hook_pipeline)


def _settings(**extra: object) -> Settings:
    return Settings.model_validate({"gateway": {"port": 0, "token": "t" * 24}, **extra})


def test_each_point_holds_the_tables_hooks_in_the_tables_order(tmp_path) -> None:
    app = App(Paths(tmp_path), _settings())
    loop, talk_tools = app.loop, app.loop.tools
    assert [type(hook).__name__ for hook in loop.after_turn] == ["DriftControl"]
    assert [type(hook).__name__ for hook in loop.before_final] == ["CompletenessCheck"]
    after_run = [getattr(hook, "__self__", hook) for hook in loop.after_run]
    assert [type(part).__name__ for part in after_run] == ["Consolidator", "DriftRestore", "BackgroundJobs"]
    assert isinstance(after_run[1], DriftRestore) and after_run[1] is app.drift_restore
    assert [type(hook).__name__ for hook in talk_tools.interceptors] == ["ToolReplay"]
    assert len(loop.context.contributors) == 2 and loop.context.followups == [loop.context.contributors[1]]


def test_without_checkpoints_there_is_no_restore_hook(tmp_path) -> None:
    app = App(Paths(tmp_path), _settings(checkpoints={"enabled": False}))
    assert app.drift_restore is None
    assert [type(getattr(h, "__self__", h)).__name__ for h in app.loop.after_run] == ["Consolidator", "BackgroundJobs"]


def test_the_table_names_only_known_points_and_says_why(tmp_path) -> None:
    paths, settings = Paths(tmp_path), _settings()
    paths.ensure()
    state = build_state(paths, settings)
    provider, _ = build_model(settings, state)
    talk = build_conversation(paths, settings, state, provider, build_approvals(settings, state))
    hooks = hook_pipeline(state, talk, build_supervision(paths, settings, state, provider, talk),
                          build_producers(paths, settings, state, talk), on_event=lambda event: None)
    points = {"events", "sessions.observers", "tools.interceptors", "tools.result_hooks", "context.contributors",
              "context.followups", "context.injectors", "loop.skip_if", "loop.after_turn", "loop.before_final",
              "loop.after_run", "loop.reply_filters"}
    assert {hook.point for hook in hooks} == points
    assert all(hook.why for hook in hooks)
    state.db.close()


def test_no_session_is_busy_before_the_loop_is_bound(tmp_path) -> None:
    activity = SessionActivity()
    assert activity.busy("telegram:1") is False
    app = App(Paths(tmp_path), _settings())
    app.loop.lanes._workers["telegram:1"] = None  # type: ignore[assignment]  # a running turn, as the lanes see it
    assert app.checkpoints.busy("telegram:1") is True and app.background.busy("telegram:1") is True


def test_offline_parts_open_the_daemons_stores_and_close_the_database(tmp_path) -> None:
    paths, settings = Paths(tmp_path), _settings()
    with Offline(paths, settings) as parts:
        job = parts.cron().add(message="hello", every="1h")
        db = parts.database()
        assert parts.cron().jobs()[0].id == job.id  # one database per command
        assert parts.checkpoints().list()["checkpoints"] == []
        assert parts.tasks().active() == []
    with pytest.raises(sqlite3.ProgrammingError, match="closed"):
        db.execute("select 1")
