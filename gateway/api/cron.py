"""cron.list, cron.add, cron.remove, cron.run, cron.enable, cron.runs (see docs/triggers.md).

Each is a thin call into the CronService; its CronError (bad expression, zone, time, unknown id,
a run still going) is a DomainError and becomes an error response with its one line.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from clawgate.agent.services import Services
from clawgate.config.agents import IMPLICIT_AGENT

from ..connection import Connection
from ..methods import Params, method
from .chat import AgentName
from .sessions import NoParams


class CronAdd(Params):
    message: str = Field(min_length=1, max_length=20_000)
    name: str | None = Field(None, max_length=200)
    cron: str | None = Field(None, max_length=200, description="crontab expression, e.g. '0 9 * * mon-fri'")
    tz: str | None = Field(None, max_length=64, description="IANA zone for cron/at")
    every: str | float | None = Field(None, description="interval: '5m', '1h30m' or seconds")
    at: str | float | None = Field(None, description="ISO-8601 time, HH:MM or +20m")
    session: str | None = Field(None, max_length=200)
    deliver: str | None = Field(None, max_length=200, description=(
        "<channel>:<chat id> (telegram:<chat_id>, slack:<channel id>, ...), gateway[:<session>] or none"))
    grace: str | float | None = Field(None, description="how late a missed run may still start, e.g. '1h'")
    agent: AgentName = None


class JobId(Params):
    id: str = Field(min_length=1, max_length=64)


class CronEnable(JobId):
    enabled: bool = True


class CronRuns(JobId):
    limit: int = Field(20, ge=1, le=10_000)


@method("cron.list", NoParams, "all cron jobs with schedule, next run, last status")
async def cron_list(services: Services, conn: Connection, p: NoParams) -> dict[str, Any]:
    return {"jobs": [with_agent(job.public(), services) for job in services.cron.jobs()]}


def with_agent(job: dict[str, Any], services: Services) -> dict[str, Any]:
    """A job as clients see it, naming its agent (the default agent's jobs keep plain session keys)."""
    if job.get("agent") is None:
        job["agent"] = services.agents.default.id if services.agents is not None else IMPLICIT_AGENT
    return job


@method("cron.add", CronAdd, "add a job: message + one of cron (with tz) / every / at; deliver, session, grace optional")
async def cron_add(services: Services, conn: Connection, p: CronAdd) -> dict[str, Any]:
    job = services.cron.add(message=p.message, name=p.name, cron=p.cron, tz=p.tz, every=p.every, at=p.at,
                            session=p.session, deliver=p.deliver, grace=p.grace, agent=services.keyed_agent(p.agent))
    return {"job": with_agent(job.public(), services)}


@method("cron.remove", JobId, "delete a job and its run history")
async def cron_remove(services: Services, conn: Connection, p: JobId) -> dict[str, Any]:
    return {"removed": services.cron.remove(p.id).public()}


@method("cron.run", JobId, "run a job now (refused while its previous run is still going); acks {runId}")
async def cron_run(services: Services, conn: Connection, p: JobId) -> dict[str, Any]:
    return {"runId": services.cron.run_now(p.id), "job": p.id}


@method("cron.enable", CronEnable, "turn a job on (resets its failure count) or off ({enabled: false})")
async def cron_enable(services: Services, conn: Connection, p: CronEnable) -> dict[str, Any]:
    return {"job": services.cron.set_enabled(p.id, p.enabled).public()}


@method("cron.runs", CronRuns, "a job's run history, newest first (start, end, status, short result)")
async def cron_runs(services: Services, conn: Connection, p: CronRuns) -> dict[str, Any]:
    return {"job": p.id, "runs": [run.public() for run in services.cron.runs(p.id, p.limit)]}
