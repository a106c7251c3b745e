"""The state and checkpoint databases of every shipped version reach today's schema and keep their rows.

Each fixture (tests/fixtures/statedb, written by that version's own code) is loaded into a file and
opened as the daemon opens it. Afterwards its tables and indexes equal a fresh file's, every row is
still there (moved or given defaults only where a migration says so), today's stores read them,
and opening it again changes nothing. A file from a newer clawgate is refused without a change.
"""

from __future__ import annotations

import importlib.util
import json
import re
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from clawgate.agent.bus import SqliteBus
from clawgate.agent.checkpoints.store import CheckpointStore
from clawgate.agent.core.schema import (CHECKPOINTS, LEGACY_TAINT, STATE, Migration, Schema, migrate, statements,
                                        version_of)
from clawgate.agent.core.statedb import StateUnavailable, open_state_db
from clawgate.agent.triggers import CronStore
from clawgate.agent.usage.store import UsageStore
from clawgate.channels.gateway_chat import GatewayChatChannel
from clawgate.channels.kit.pairing import PairingStore
from clawgate.channels.kit.store import ChannelStore

FIXTURES = Path(__file__).resolve().parents[4] / "tests" / "fixtures" / "statedb"


def _generator() -> Any:
    spec = importlib.util.spec_from_file_location("make_fixtures", FIXTURES / "make_fixtures.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


GENERATOR = _generator()
VERSIONS = [name for name, _ in GENERATOR.VERSIONS]
WITH_CHECKPOINTS = [name for name in VERSIONS if (FIXTURES / f"{name}.checkpoints.sql").exists()]


def load(fixture: Path, path: Path) -> Path:
    db = sqlite3.connect(path)
    db.executescript(fixture.read_text())
    db.close()
    return path


def _sql(text: str | None) -> str:
    text = re.sub(r"--[^\n]*", "", text or "").replace("IF NOT EXISTS", "")
    return re.sub(r"\s*([(),])\s*", r"\1", re.sub(r"\s+", " ", text)).strip()


def shape(db: sqlite3.Connection) -> dict[str, Any]:
    """Tables and indexes as SQLite sees them: normalised SQL, columns, index columns."""
    found: dict[str, Any] = {}
    for kind, name, table, sql in db.execute("SELECT type, name, tbl_name, sql FROM sqlite_master ORDER BY name"):
        found[name] = (kind, table, _sql(sql))
        if kind == "table":
            found[f"{name} columns"] = db.execute(f'PRAGMA table_xinfo("{name}")').fetchall()
        if kind == "index":
            found[f"{name} keys"] = db.execute(f'PRAGMA index_xinfo("{name}")').fetchall()
    return found


def rows(db: sqlite3.Connection) -> dict[str, list[tuple[Any, ...]]]:
    tables = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")]
    return {t: sorted(db.execute(f'SELECT * FROM "{t}"').fetchall(), key=repr) for t in tables}


def dump(db: sqlite3.Connection) -> list[str]:
    return [*db.iterdump(), f"user_version={version_of(db)}"]


def test_there_is_a_fixture_for_every_shipped_version() -> None:
    assert VERSIONS and all((FIXTURES / f"{name}.sql").exists() for name in VERSIONS)
    assert {"v0.1.0-008d2e7", "v0.1.0-af9ae00"} <= set(WITH_CHECKPOINTS)  # checkpoints.db from 008d2e7 on


def test_the_newest_schema_version_has_a_file_of_its_own() -> None:
    """So a later version's migrations are tested from this one's file, not only from version 0."""
    versions = set()
    for name in VERSIONS:
        db = sqlite3.connect(":memory:")
        db.executescript((FIXTURES / f"{name}.sql").read_text())
        versions.add(version_of(db))
    assert STATE.version in versions


def test_a_new_file_gets_exactly_the_declared_schema(tmp_path: Path) -> None:
    fresh = open_state_db(tmp_path / "fresh.db", fsync=False)
    declared = sqlite3.connect(":memory:")
    declared.executescript(STATE.tables)
    assert version_of(fresh) == STATE.version
    assert shape(fresh) == shape(declared)
    assert {"inbox", "outbox", "cron_jobs", "usage", "pairing_requests", "channel_state", "gateway_chat"} <= set(
        rows(fresh))


TELEGRAM_TO_CHANNEL = {"telegram_state": "channel_state", "telegram_sent": "channel_sent",
                       "telegram_seen": "channel_seen", "telegram_refused": "channel_refused",
                       "telegram_owner_ids": "channel_owner_ids"}


@pytest.mark.parametrize("name", VERSIONS)
def test_a_shipped_state_database_migrates_to_the_current_schema_and_keeps_its_rows(name: str, tmp_path: Path) -> None:
    path = load(FIXTURES / f"{name}.sql", tmp_path / "clawgate.db")
    old = sqlite3.connect(path)
    before, old_version = rows(old), version_of(old)
    old.close()
    assert old_version <= STATE.version and before["inbox"] and before["cron_jobs"]

    db = open_state_db(path, fsync=False)
    assert version_of(db) == STATE.version
    assert shape(db) == shape(open_state_db(tmp_path / "fresh.db", fsync=False))
    after = rows(db)
    for table, kept in before.items():
        if table == "kv":  # the first versions' shared table: its one key became Telegram's cursor
            assert "kv" not in after
            assert ("telegram", "cursor", "424242") in after["channel_state"]
        elif table in TELEGRAM_TO_CHANNEL:  # Telegram's own tables became the channel kit's
            assert table not in after
            for row in kept:
                if table == "telegram_state" and row[0] == "telegram:offset":
                    row = ("cursor", *row[1:])
                assert ("telegram", *row) in after[TELEGRAM_TO_CHANNEL[table]], (table, row)
        elif table == "cron_jobs":
            assert [(i, t) for i, _, t in after[table]] == [(i, t) for i, _, t in kept]
            for (_, old_body, _), (_, new_body, _) in zip(kept, after[table]):
                was, now = json.loads(old_body), json.loads(new_body)
                assert now == {**was, "created_by": was.get("created_by", ""), "tainted": was.get("tainted", LEGACY_TAINT)}
        else:
            assert after[table] == kept, table


@pytest.mark.parametrize("name", VERSIONS)
def test_today_s_stores_read_what_a_shipped_version_wrote(name: str, tmp_path: Path) -> None:
    path = load(FIXTURES / f"{name}.sql", tmp_path / "clawgate.db")
    old = sqlite3.connect(path)
    had = rows(old)
    old.close()
    db = open_state_db(path, fsync=False)

    bus = SqliteBus(db)
    assert [m.text for m in bus.unanswered()] == ["still waiting"]
    assert [m.text for m in bus.undelivered()] == ["On it."]

    cron = CronStore(db)
    jobs = {job.message: job for job in cron.jobs()}
    assert sorted(jobs) == ["morning briefing", "water the plants"]
    recorded_taint = all("tainted" in json.loads(body) for _, body, _ in had["cron_jobs"])
    for job in jobs.values():
        assert job.created_by == ""  # the owner made every job before guests could
        assert job.tainted == ("" if recorded_taint else LEGACY_TAINT)
        assert job.plan.next_after(job.created_at) is not None  # the schedule as stored is understood
    [run] = cron.runs(jobs["morning briefing"].id)
    assert (run.status, run.result) == ("ok", "Briefing sent.")

    asked_at = max(r[5] for r in had["pairing_requests"])
    pairing = PairingStore(db, clock=lambda: asked_at)
    assert pairing.is_paired("telegram", "1001") and not pairing.is_paired("telegram", "1002")
    assert [r.user_id for r in pairing.pending("telegram")] == ["1002"]

    state = ChannelStore(db, "telegram")
    assert state.cursor() == "424242"
    assert state.chunks_sent("out_pending") == 2
    assert not state.first_time("cmd:4242:17") and state.refused_before("666")
    if "telegram_owner_ids" in had:
        assert state.owner_ids() == {"owner_name": "777"}
    if "usage" in had:
        totals = UsageStore(db).load(GENERATOR.DAY)
        assert totals.by_day[GENERATOR.DAY]["calls"] == 3 and totals.by_session["gateway:main"]["input_tokens"] == 1200
    if "gateway_chat" in had:
        assert GatewayChatChannel(_NoClients(), db).last_seq("main") == 1


class _NoClients:
    def broadcast(self, name: str, payload: dict[str, Any], session: str | None = None) -> int:
        return 0


@pytest.mark.parametrize("name", VERSIONS)
def test_migrating_again_changes_nothing(name: str, tmp_path: Path) -> None:
    path = load(FIXTURES / f"{name}.sql", tmp_path / "clawgate.db")
    first = open_state_db(path, fsync=False)
    once = dump(first)
    first.close()
    again = open_state_db(path, fsync=False)
    assert dump(again) == once
    assert migrate(again, STATE) == []
    assert dump(again) == once


@pytest.mark.parametrize("name", WITH_CHECKPOINTS)
def test_a_shipped_checkpoint_database_migrates_and_its_checkpoints_load(name: str, tmp_path: Path) -> None:
    folder = tmp_path / "checkpoints"
    folder.mkdir()
    old = sqlite3.connect(load(FIXTURES / f"{name}.checkpoints.sql", folder / "checkpoints.db"))
    before = rows(old)
    old.close()
    store = CheckpointStore(folder, fsync=False)
    db = sqlite3.connect(folder / "checkpoints.db")
    fresh = open_state_db(tmp_path / "fresh.db", fsync=False, schema=CHECKPOINTS)
    assert version_of(db) == CHECKPOINTS.version and shape(db) == shape(fresh)
    assert rows(db) == before
    assert store.head("gateway:main") == "cp_fixture0001"
    checkpoint = store.get("cp_fixture0001")
    assert checkpoint is not None and checkpoint.description == "before: what is on today?"


def test_a_file_from_a_newer_clawgate_is_refused_and_left_untouched(tmp_path: Path) -> None:
    path = tmp_path / "clawgate.db"
    newer = sqlite3.connect(path)
    newer.execute("CREATE TABLE future_things (id INTEGER PRIMARY KEY)")
    newer.execute(f"PRAGMA user_version = {STATE.version + 1}")
    newer.commit()
    newer.close()
    original = path.read_bytes()
    with pytest.raises(StateUnavailable) as refused:
        open_state_db(path)
    assert str(refused.value) == (f"{path} was written by a newer clawgate (schema {STATE.version + 1} > "
                                  f"{STATE.version}); upgrade clawgate or restore a backup")
    assert path.read_bytes() == original
    assert sorted(p.name for p in tmp_path.iterdir()) == ["clawgate.db"]  # no WAL, nothing set aside


def test_a_migration_that_fails_leaves_the_file_at_the_version_before(tmp_path: Path) -> None:
    def half_then_fail(db: sqlite3.Connection) -> None:
        db.execute("CREATE TABLE half (x)")
        raise sqlite3.OperationalError("disk I/O error")

    schema = Schema("CREATE TABLE IF NOT EXISTS one (x);", (
        Migration(1, "one", lambda db: db.execute("CREATE TABLE IF NOT EXISTS one (x)")),
        Migration(2, "breaks halfway", half_then_fail)))
    db = sqlite3.connect(tmp_path / "x.db", isolation_level=None)
    with pytest.raises(sqlite3.OperationalError):
        migrate(db, schema)
    assert version_of(db) == 1 and not db.in_transaction
    assert [r[0] for r in db.execute("SELECT name FROM sqlite_master")] == ["one"]


def test_the_declared_sql_splits_into_whole_statements() -> None:
    found = statements(STATE.tables)
    assert all(sqlite3.complete_statement(s) for s in found)
    assert len(found) == len(re.findall(r"\bCREATE (?:TABLE|INDEX)\b", STATE.tables))
