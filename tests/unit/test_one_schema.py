"""Every SQLite table and index is declared in one module (agent/core/schema.py), nowhere else.

A store that created its own table would escape the schema version and the migrations tested
from every shipped version (tests/unit/agent/core/test_schema.py). The memory search index is no
state: an FTS5 table in memory, rebuilt from the files (CREATE VIRTUAL TABLE, and temp tables,
are not matched here).
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("gateway", "channels", "agent", "workspace", "config")
SCHEMA_MODULE = ROOT / "agent" / "core" / "schema.py"
# Tables in the connection's own `temp` schema (the memory search's per-query scope) are no state.
DDL = re.compile(r"\b(CREATE\s+(?:UNIQUE\s+)?(?:TABLE|INDEX)|ALTER\s+TABLE|DROP\s+(?:TABLE|INDEX)(?!\s+IF\s+EXISTS\s+temp\.)"
                 r"|user_version)\b", re.IGNORECASE)


def schema_statements_outside_the_schema_module(root: Path) -> list[str]:
    found = []
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            if path.resolve() == (root / "agent" / "core" / "schema.py").resolve():
                continue
            for number, line in enumerate(path.read_text().splitlines(), 1):
                if DDL.search(line):
                    found.append(f"{path.relative_to(root)}:{number}: {line.strip()}")
    return found


def test_no_module_but_the_schema_module_declares_tables() -> None:
    assert SCHEMA_MODULE.is_file()
    assert schema_statements_outside_the_schema_module(ROOT) == []


def test_the_check_finds_a_store_that_creates_its_own_table(tmp_path: Path) -> None:
    for package in PACKAGES:
        (tmp_path / package).mkdir()
    (tmp_path / "channels" / "store.py").write_text('SCHEMA = "create table if not exists mine (x)"\n')
    (tmp_path / "agent" / "migrate.py").write_text('db.execute("PRAGMA user_version = 9")\n')
    assert sorted(schema_statements_outside_the_schema_module(tmp_path)) == [
        'agent/migrate.py:1: db.execute("PRAGMA user_version = 9")',
        'channels/store.py:1: SCHEMA = "create table if not exists mine (x)"',
    ]
