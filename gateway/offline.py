"""The daemon's parts on its files, for the CLI commands that also work while no daemon runs.

`clawgate checkpoints`, `cron`, `tasks`, `usage` and `pairing` go through the running gateway when
there is one; otherwise (under the instance lock, gateway/cli/remote.py) they open the same stores
the daemon would, built by the same functions (gateway/wiring.py), with nothing started: no loop,
no busy session, no repair of a damaged store (it is reported instead, and left for the daemon).
Each part is opened on first use and the database is closed when the `with` block ends.
"""

from __future__ import annotations

import sqlite3
from contextlib import ExitStack
from types import TracebackType
from typing import TYPE_CHECKING, Any

from clawgate.config.paths import Paths
from clawgate.config.schema import Settings

if TYPE_CHECKING:
    from clawgate.agent.checkpoints import CheckpointService
    from clawgate.agent.tasks.store import TaskStore
    from clawgate.agent.triggers import CronService
    from clawgate.agent.usage.ledger import UsageLedger
    from clawgate.channels.kit.pairing import PairingStore


class Offline:
    """`with Offline(paths, settings) as parts: parts.cron().add(...)`."""

    def __init__(self, paths: Paths, settings: Settings) -> None:
        self.paths, self.settings = paths, settings
        self._db: sqlite3.Connection | None = None
        self._closing = ExitStack()

    def __enter__(self) -> "Offline":
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self._closing.close()

    def database(self) -> sqlite3.Connection:
        """The daemon's SQLite file (WAL: a running daemon re-reads what is written here)."""
        if self._db is None:
            from clawgate.agent.core.statedb import open_state_db

            self.paths.ensure()
            self._db = open_state_db(self.paths.database, fsync=self.settings.state.fsync, repair=False)
            self._closing.callback(self._db.close)
        return self._db

    def tasks(self) -> "TaskStore":
        from clawgate.agent.tasks.store import TaskStore

        return TaskStore(self.paths.tasks, fsync=self.settings.state.fsync)

    def checkpoints(self) -> "CheckpointService":
        """The daemon's checkpoint service; no session is busy and no context cache needs clearing."""
        from clawgate.agent.core.events import EventHub
        from clawgate.agent.session import SessionManager

        from .wiring import build_checkpoints, build_workspaces

        return build_checkpoints(self.paths, self.settings, build_workspaces(self.paths, self.settings),
                                 SessionManager(self.paths.sessions, fsync=self.settings.state.fsync), self.tasks(),
                                 EventHub(), busy=lambda key: False, invalidate=lambda key: None, repair=False)

    def cron(self) -> "CronService":
        """The cron service on the store; `run` leaves the run in the inbox for the daemon's next start."""
        from clawgate.agent.bus import SqliteBus
        from clawgate.agent.core.events import EventHub
        from clawgate.agent.triggers import CronService, CronStore

        db = self.database()
        return CronService(CronStore(db, history=self.settings.cron.history), SqliteBus(db), EventHub(),
                           self.settings.cron)

    def usage(self) -> "UsageLedger":
        from clawgate.agent.usage.ledger import UsageLedger
        from clawgate.agent.usage.store import UsageStore

        return UsageLedger(UsageStore.open(self.paths.database))

    def pairing(self, channel: str | None = None) -> "PairingStore":
        """The pairing store, with `channel`'s pairing limits (Telegram's when none is named)."""
        from clawgate.channels.kit.pairing import PairingStore
        from clawgate.config.access import AccessSettings, split_channel_name

        platform, account = split_channel_name(channel or "telegram")
        telegram = self.settings.channels.telegram
        section: Any = telegram.model_dump(exclude_unset=True) if platform == "telegram" else \
            self.settings.channels.sections().get(platform) or {}
        own = (section.get("accounts") or {}).get(account) if platform != channel else None
        table = {**section, **(own if isinstance(own, dict) else {})}  # an account's keys over its section's
        if channel in (None, "telegram"):
            access: Any = telegram
        else:
            access = AccessSettings(**{k: v for k, v in table.items() if k.startswith("pairing_")})
        return PairingStore(self.database(), ttl_seconds=access.pairing_ttl_seconds,
                            max_pending=access.pairing_max_pending,
                            interval_seconds=access.pairing_request_interval_seconds)
