"""Token usage on disk: one row per (day, session) in the state database, added to in batches.

Why a table and not the session logs: totals per day and per session must survive restarts
without reading any history at start-up or per message; a row per day and session stays
small (a few hundred rows a year for a personal agent), and the ledger (usage.py) writes
accumulated deltas every few seconds, never per model call.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field
from pathlib import Path

from clawgate.agent.core.statedb import open_state_db

# Anthropic's names for the four counts (the OpenAI-compatible adapter maps to them), plus calls.
TOKENS = ("input_tokens", "output_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")
FIELDS = ("calls", *TOKENS)
_COLUMNS = ("calls", "input_tokens", "output_tokens", "cache_read", "cache_write")

_SUMS = ", ".join(f"SUM({c})" for c in _COLUMNS)

Counts = dict[str, int]


def zero() -> Counts:
    return dict.fromkeys(FIELDS, 0)


@dataclass
class Totals:
    """What the ledger starts from: per day, per session, and per session on `day`."""

    day: str
    by_day: dict[str, Counts] = field(default_factory=dict)
    by_session: dict[str, Counts] = field(default_factory=dict)
    day_sessions: dict[str, Counts] = field(default_factory=dict)


class UsageStore:
    def __init__(self, db: sqlite3.Connection) -> None:
        self.db = db

    @classmethod
    def open(cls, path: Path) -> "UsageStore":
        """On its own connection (the offline CLI); never repairs: only the daemon sets files aside."""
        return cls(open_state_db(path, repair=False))

    def load(self, day: str) -> Totals:
        """Three grouped reads, once at start-up."""
        def rows(sql: str, *args: str) -> dict[str, Counts]:
            return {key: dict(zip(FIELDS, (int(v or 0) for v in values)))
                    for key, *values in self.db.execute(sql, args)}

        return Totals(
            day=day,
            by_day=rows(f"SELECT day, {_SUMS} FROM usage GROUP BY day"),
            by_session=rows(f"SELECT session, {_SUMS} FROM usage GROUP BY session"),
            day_sessions=rows(f"SELECT session, {_SUMS} FROM usage WHERE day=? GROUP BY session", day),
        )

    def add(self, deltas: dict[tuple[str, str], Counts]) -> None:
        """Add accumulated counts per (day, session), in one transaction."""
        upsert = (f"INSERT INTO usage(day, session, {', '.join(_COLUMNS)}) VALUES(?, ?, ?, ?, ?, ?, ?) "
                  "ON CONFLICT(day, session) DO UPDATE SET "
                  + ", ".join(f"{c}={c}+excluded.{c}" for c in _COLUMNS))
        with self.db:
            self.db.execute("BEGIN")
            self.db.executemany(upsert, [(day, session, *(counts[f] for f in FIELDS))
                                         for (day, session), counts in deltas.items()])
