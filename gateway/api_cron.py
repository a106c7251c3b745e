"""Gateway methods for cron jobs: cron.list, cron.add, cron.remove, cron.run (+ enable, runs).

Each is a thin call into the daemon's CronService; a CronError (bad expression, zone, time,
unknown id, a run still going) becomes an error response with its one-line message.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Awaitable, Callable

from pydantic import Field

from agent.triggers.jobs import CronError

from . import protocol
from .methods import MethodError, MethodTable, Params

if TYPE_CHECKING:
    from .daemon import Daemon
    from .server import Connection

_CODES = {"invalid_params": protocol.INVALID_PARAMS, "not_found": protocol.NOT_FOUND, "conflict": protocol.CONFLICT}


class CronAdd(Params):
    message: str = Field(min_length=1, max_length=20_000)
    name: str | None = Field(None, max_length=200)
    cron: str | None = Field(None, max_length=200, description="crontab expression, e.g. '0 9 * * mon-fri'")
    tz: str | None = Field(None, max_length=64, description="IANA zone for cron/at")
    every: str | float | None = Field(None, description="interval: '5m', '1h30m' or seconds")
    at: str | float | None = Field(None, description="ISO-8601 time, HH:MM or +20m")
    session: str | None = Field(None, max_length=200)
    deliver: str | None = Field(None, max_length=200, description="telegram:<chat_id>, gateway[:<session>] or none")
    grace: str | float | None = Field(None, description="how late a missed run may still start, e.g. '1h'")


class JobId(Params):
    id: str = Field(min_length=1, max_length=64)


class CronEnable(JobId):
    enabled: bool = True


class CronRuns(JobId):
    limit: int = Field(20, ge=1, le=10_000)


def _guard(fn: Callable[..., Awaitable[dict[str, Any]]]) -> Callable[..., Awaitable[dict[str, Any]]]:
    async def call(conn: "Connection", p: Any) -> dict[str, Any]:
        try:
            return await fn(conn, p)
        except CronError as exc:
            raise MethodError(_CODES.get(exc.code, protocol.INVALID_PARAMS), exc.message) from None
    return call


def register(table: MethodTable, daemon: "Daemon") -> None:
    def cron():  # looked up per call: the triggers are built after the method table
        return daemon.triggers.cron

    @table.add("cron.list", Params, "all cron jobs with schedule, next run, last status")
    @_guard
    async def cron_list(conn: "Connection", p: Params) -> dict[str, Any]:
        return {"jobs": [job.public() for job in cron().jobs()]}

    @table.add("cron.add", CronAdd, "add a job: message + one of cron (with tz) / every / at; deliver, session, grace optional")
    @_guard
    async def cron_add(conn: "Connection", p: CronAdd) -> dict[str, Any]:
        job = cron().add(message=p.message, name=p.name, cron=p.cron, tz=p.tz, every=p.every, at=p.at,
                         session=p.session, deliver=p.deliver, grace=p.grace)
        return {"job": job.public()}

    @table.add("cron.remove", JobId, "delete a job and its run history")
    @_guard
    async def cron_remove(conn: "Connection", p: JobId) -> dict[str, Any]:
        return {"removed": cron().remove(p.id).public()}

    @table.add("cron.run", JobId, "run a job now (refused while its previous run is still going); acks {runId}")
    @_guard
    async def cron_run(conn: "Connection", p: JobId) -> dict[str, Any]:
        return {"runId": cron().run_now(p.id), "job": p.id}

    @table.add("cron.enable", CronEnable, "turn a job on (resets its failure count) or off ({enabled: false})")
    @_guard
    async def cron_enable(conn: "Connection", p: CronEnable) -> dict[str, Any]:
        return {"job": cron().set_enabled(p.id, p.enabled).public()}

    @table.add("cron.runs", CronRuns, "a job's run history, newest first (start, end, status, short result)")
    @_guard
    async def cron_runs(conn: "Connection", p: CronRuns) -> dict[str, Any]:
        return {"job": p.id, "runs": [run.public() for run in cron().runs(p.id, p.limit)]}
