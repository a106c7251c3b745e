"""Token usage: every model call counted per day and per session, kept across restarts.

`MeteredProvider` wraps the provider the daemon uses, so every real API call counts — the
loop's turns and the calls around them (drift reflection, the completeness check, memory
consolidation) — while answers replayed from a checkpoint tape (which wraps this) cost and
count nothing. Calls whose request names no session count for the session whose turn ran
last in the same task (the checks and summaries of that run).

Cost per call is a few dictionary additions: the ledger keeps running totals in memory
(loaded once at start with three grouped reads) and writes the accumulated deltas to the
state database `flush_seconds` after the first unsaved call, in one transaction, and on
shutdown. A crash loses at most that window. Per-turn figures are in the session log's
assistant records and in each `turn_end` trace line.
"""

from __future__ import annotations

import asyncio
import contextvars
import heapq
import logging
import sqlite3
from datetime import datetime
from typing import Any, Callable, Protocol

from clawgate.config.agents import agent_id_of

from ..providers.base import ModelRequest, ModelResponse, Provider, ProviderError, TextCallback
from .store import FIELDS, TOKENS, Counts, Totals, UsageStore, zero

log = logging.getLogger(__name__)
NO_SESSION = ""
_run_session: contextvars.ContextVar[str] = contextvars.ContextVar("usage_session", default=NO_SESSION)


def local_day() -> str:
    """The daemon host's local date: "today" is the owner's day, not UTC's."""
    return datetime.now().astimezone().date().isoformat()


def _add(into: Counts, delta: Counts) -> None:
    for key in FIELDS:
        into[key] += delta[key]


def _tokens(counts: Counts) -> int:
    return sum(counts[key] for key in TOKENS)


def usage_tokens(usage: dict[str, Any]) -> int:
    """The tokens one call's usage counts for, as `record` counts them."""
    return sum(value for key in TOKENS if isinstance(value := usage.get(key), int) and value > 0)


class UsageLedger:
    def __init__(self, store: UsageStore | None, *, flush_seconds: float = 5.0,
                 today: Callable[[], str] = local_day) -> None:
        self.store = store
        self.flush_seconds = flush_seconds
        self._today = today
        totals = store.load(today()) if store is not None else Totals(day=today())
        self.day = totals.day
        self.by_day, self.by_session, self.day_sessions = totals.by_day, totals.by_session, totals.day_sessions
        self.since_start = zero()
        self._total = zero()
        for counts in self.by_day.values():
            _add(self._total, counts)
        self._pending: dict[tuple[str, str], Counts] = {}
        self._timer: asyncio.TimerHandle | None = None
        # tokens per agent on `day` (None: the default agent), for each agent's daily_tokens: O(1) per call
        self.day_agents: dict[str | None, int] = {}
        for key, counts in self.day_sessions.items():
            self.day_agents[agent_id_of(key)] = self.day_agents.get(agent_id_of(key), 0) + _tokens(counts)

    # recording ---------------------------------------------------------------------------------
    def record(self, session: str, usage: dict[str, Any]) -> None:
        """One model call's usage. O(1): running totals plus the batch waiting to be written."""
        delta = zero()
        delta["calls"] = 1
        for key in TOKENS:
            value = usage.get(key)
            if isinstance(value, int) and value > 0:
                delta[key] = value
        day = self._today()
        if day != self.day:
            self.day, self.day_sessions, self.day_agents = day, {}, {}
        agent = agent_id_of(session)
        self.day_agents[agent] = self.day_agents.get(agent, 0) + _tokens(delta)
        for counts in (self.since_start, self._total, self.by_day.setdefault(day, zero()),
                       self.by_session.setdefault(session, zero()), self.day_sessions.setdefault(session, zero()),
                       self._pending.setdefault((day, session), zero())):
            _add(counts, delta)
        self._schedule()

    def _schedule(self, *, retry: bool = False) -> None:
        if self.store is None or self._timer is not None:
            return
        try:
            self._timer = asyncio.get_running_loop().call_later(self.flush_seconds, self.flush)
        except RuntimeError:  # no event loop (a script, a unit test): write now; a retry waits for the next call
            if not retry:
                self.flush()

    def flush(self) -> None:
        """Write the accumulated deltas; on a database error keep them for the next try."""
        self._timer = None
        if not self._pending or self.store is None:
            return
        batch, self._pending = self._pending, {}
        try:
            self.store.add(batch)
        except sqlite3.Error as exc:
            log.error("could not save token usage (%s); will retry", exc)
            for key, counts in batch.items():
                _add(self._pending.setdefault(key, zero()), counts)
            self._schedule(retry=True)

    def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self.flush()

    # reading -----------------------------------------------------------------------------------
    def snapshot(self, *, top: int = 5) -> dict[str, Any]:
        """For `status`: today, the total, since start, and the sessions that used the most."""
        return {"day": self.day, "today": self.today(), "total": self.total(), "sinceStart": dict(self.since_start),
                "topSessions": self.top_sessions(top)}

    def today(self) -> Counts:
        return dict(self.by_day.get(self.day) or zero()) if self.day == self._today() else zero()

    def total(self) -> Counts:
        return dict(self._total)

    def top_sessions(self, n: int) -> list[dict[str, Any]]:
        best = heapq.nlargest(n, self.by_session.items(), key=lambda item: _tokens(item[1]))
        return [{"session": key, **counts, "today": self.session_today(key)} for key, counts in best]

    def current_day(self) -> str:
        """The day calls are counted for now (the host's local date)."""
        return self._today()

    def agent_today(self, agent: str | None) -> int:
        """Tokens the sessions of an agent (None: the default agent) used today."""
        return self.day_agents.get(agent, 0) if self.day == self._today() else 0

    def session_today(self, key: str) -> Counts:
        return dict(self.day_sessions.get(key) or zero()) if self.day == self._today() else zero()

    def report(self, *, session: str | None = None, days: int = 7, top: int = 5) -> dict[str, Any]:
        """The `usage` method: the snapshot plus the last `days` days and, if asked, one session."""
        out = self.snapshot(top=top)
        out["days"] = [{"day": day, **self.by_day[day]} for day in sorted(self.by_day)[-days:]][::-1]
        if session is not None:
            out["session"] = {"session": session, "today": self.session_today(session),
                              "total": dict(self.by_session.get(session) or zero())}
        return out


class Budget(Protocol):
    """Who may call the model now (gateway/agent_scope.py `TokenBudget`): asked before every call of a
    session, told each call's tokens after it. Async, so a fleet can keep the count in Redis."""

    async def refuse(self, session: str) -> str | None: ...

    async def spent(self, session: str, tokens: int) -> None: ...


class MeteredProvider:
    """Counts each call's usage in the ledger; everything else is the wrapped provider's. `budget`: why a
    session may not call the model now (its agent's daily_tokens spent), or None; checked before every call
    of the session's runs, its checks and summaries included, and told each call's tokens."""

    def __init__(self, inner: Provider, ledger: UsageLedger, budget: Budget | None = None) -> None:
        self.inner = inner
        self.ledger = ledger
        self.budget = budget

    @property
    def name(self) -> str:
        return self.inner.name

    def __getattr__(self, attr: str) -> Any:  # warm(), breaker_states() and other extras of the inner provider
        return getattr(self.inner, attr)

    async def complete(self, request: ModelRequest, on_text: TextCallback | None = None) -> ModelResponse:
        if request.session_key:
            _run_session.set(request.session_key)  # this task's later session-less calls count here too
        session = request.session_key or _run_session.get()
        if self.budget is not None and (reason := await self.budget.refuse(session)) is not None:
            raise ProviderError(reason, cause="daily token budget spent")
        response = await self.inner.complete(request, on_text)
        self.ledger.record(session, response.usage)
        if self.budget is not None:
            await self.budget.spent(session, usage_tokens(response.usage))
        return response

    async def close(self) -> None:
        await self.inner.close()
