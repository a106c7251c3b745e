"""Webhooks in a fleet: every process listens on its own port (a load balancer in front spreads the
calls), the delivery id makes the inbox take a delivery once fleet-wide, and the run happens on the
worker holding the hook session's partition, whichever process took the call. Real daemons, a real
redis-server, calls over HTTP (docs/hooks.md, "In a fleet")."""

from __future__ import annotations

import asyncio
import json
import threading
from email.message import EmailMessage
from email.utils import make_msgid
from typing import Any

import httpx

from clawgate.agent.fleet.keys import partition_of
from tests.e2e.fleet.test_fleet_channels import imap_connections
from tests.e2e.fleet.test_fleet_work import fleet_status
from tests.email_servers import Dovecot, dovecot, unique_address  # noqa: F401  (fixture)
from tests.fakes.anthropic_api import FakeAnthropic, Reply, last_user_text, text
from tests.fleet_support import PARTITIONS, Fleet
from tests.harness import DaemonProcess, free_port
from tests.hooks_support import TOKEN, call_bearer
from tests.waiting import DEFAULT_TIMEOUT, wait_past, wait_until

CI = f'''
[hooks.ci]
token = "{TOKEN}"
message = "CI says: {{{{ body.status }}}}"
id_header = "X-GitHub-Delivery"
'''
SESSION = "hooks:ci"


def start_two(fleet_factory, tables: str = CI, session: str = SESSION) -> tuple[Fleet, DaemonProcess, DaemonProcess]:
    """Two processes with the hook, each listening on a port of its own; (fleet, the holder of `session`'s
    partition, the other)."""
    fleet: Fleet = fleet_factory()
    first = fleet.add(start=False, env={"CLAWGATE_GATEWAY__HOOKS_PORT": str(free_port())})
    config = fleet.home / "config.toml"
    config.write_text(config.read_text() + tables)
    first.start()
    fleet.add(env={"CLAWGATE_GATEWAY__HOOKS_PORT": str(free_port())})
    r = fleet.spread(2)
    node = fleet.holder(r, partition_of(session, PARTITIONS))
    assert node is not None
    holder = fleet.by_node(node)
    return fleet, holder, next(p for p in fleet.procs if p is not holder)


def post(proc: DaemonProcess, name: str, body: dict[str, Any], headers: dict[str, str] | None = None) -> httpx.Response:
    return asyncio.run(call_bearer(proc, name, body, headers=headers))


async def _history(proc: DaemonProcess) -> list[dict[str, Any]]:
    async with proc.client() as client:
        return (await client.request("chat.history", {"session": SESSION}))["messages"]


def asked(fake: FakeAnthropic, words: str) -> int:
    return sum(1 for r in fake.requests if words in last_user_text(r))


def user_lines(fleet: Fleet) -> list[dict[str, Any]]:
    log = fleet.home / "state/sessions" / "hooks%3Aci.jsonl"
    lines = [json.loads(line) for line in log.read_text().splitlines() if line.strip()] if log.exists() else []
    return [line for line in lines if line.get("kind") == "user"]


def test_the_same_delivery_sent_to_two_processes_runs_once_on_the_partition_holder(
        fleet_factory, fake_model: FakeAnthropic) -> None:
    fleet, holder, other = start_two(fleet_factory)
    fake_model.enqueue_for("CI says: red", text("looking at the red build"))
    # the sender retries through the load balancer, which picks the other process the second time
    first = post(other, "ci", {"status": "red"}, headers={"X-GitHub-Delivery": "fleet-1"})
    again = post(holder, "ci", {"status": "red"}, headers={"X-GitHub-Delivery": "fleet-1"})
    assert first.status_code == 202 and first.json() == {"id": "hook:ci:fleet-1", "duplicate": False}
    assert again.status_code == 202 and again.json() == {"id": "hook:ci:fleet-1", "duplicate": True}
    # taken in by `other`, run by the worker holding hooks:ci's partition
    wait_until(lambda: fleet_status(holder)["answered"] == 1, "the run answered on the partition's holder",
               describe=fleet.logs)
    wait_past(2.0)  # past the answer's bookkeeping: a second run would have reached the model by now
    assert asked(fake_model, "CI says: red") == 1
    assert fleet_status(other)["answered"] == 0
    assert len(user_lines(fleet)) == 1


def test_a_kill_after_the_202_runs_the_call_once_on_another_process(
        fleet_factory, fake_model: FakeAnthropic) -> None:
    release = threading.Event()
    calls: list[str] = []

    def held(body: dict[str, Any]) -> Reply:
        said = last_user_text(body)
        if "CI says" in said:
            calls.append(said)
            if len(calls) == 1:  # the first attempt hangs until its process is killed
                release.wait(DEFAULT_TIMEOUT)
        return text("handled the failed build")

    fake_model.responder = held
    fleet, holder, other = start_two(fleet_factory)
    accepted = post(other, "ci", {"status": "failed"}, headers={"X-GitHub-Delivery": "crash-1"})
    assert accepted.status_code == 202 and accepted.json()["duplicate"] is False
    wait_until(lambda: calls, "the run to reach the model", describe=fleet.logs)
    holder.kill()  # SIGKILL of the worker running it, after the sender got its 202
    release.set()
    # the survivor takes the partition over, claims the entry and runs it from the session log
    wait_until(lambda: fleet_status(other)["answered"] >= 1, "the run answered by the survivor", describe=fleet.logs)
    # the sender, never told twice, retries: still one delivery
    again = post(other, "ci", {"status": "failed"}, headers={"X-GitHub-Delivery": "crash-1"})
    assert again.json() == {"id": "hook:ci:crash-1", "duplicate": True}
    wait_past(2.0)
    assert len(calls) == 2  # the cut attempt and the one resumed elsewhere; the repeat ran nothing
    assert fleet_status(other)["answered"] == 1
    assert len(user_lines(fleet)) == 1
    history = asyncio.run(_history(other))
    answers = [m for m in history if m.get("role") == "assistant" and "handled the failed build" in json.dumps(m)]
    assert len(answers) == 1, history


def test_a_hook_of_another_agent_runs_on_its_sessions_partition_holder_as_that_agent(
        fleet_factory, fake_model: FakeAnthropic) -> None:
    """A hook naming an agent runs in that agent's session (`agent:work:hooks:ci`): its partition, so its
    process, is computed from that key, and the run there uses the agent's model."""
    tables = ('\n[agents.home]\ndefault = true\n[agents.work]\nmodel = "claude-work-model"\n'
              + CI.replace("[hooks.ci]", '[hooks.ci]\nagent = "work"'))
    fleet, holder, other = start_two(fleet_factory, tables, session="agent:work:hooks:ci")
    accepted = post(other, "ci", {"status": "amber"}, headers={"X-GitHub-Delivery": "agent-1"})
    assert accepted.status_code == 202 and accepted.json()["duplicate"] is False
    wait_until(lambda: fleet_status(holder)["answered"] == 1, "the run answered on the partition's holder",
               describe=fleet.logs)
    [request] = [r for r in fake_model.requests if "CI says: amber" in last_user_text(r)]
    assert request["model"] == "claude-work-model"
    assert fleet_status(other)["answered"] == 0
    assert (fleet.home / "state/sessions" / "agent%3Awork%3Ahooks%3Aci.jsonl").exists()


def test_a_hooks_burst_and_rate_hold_for_the_fleet_not_per_process(fleet_factory) -> None:
    """Two processes together take the hook's `burst`, not twice it: the bucket is shared in Redis."""
    limited = f'\n[hooks.small]\ntoken = "{TOKEN}"\nburst = 2\nrate_per_minute = 1\n'
    fleet, holder, other = start_two(fleet_factory, CI + limited)
    statuses = [post(proc, "small", {"n": n}).status_code for n, proc in enumerate((holder, other, holder, other))]
    assert statuses == [202, 202, 429, 429], statuses
    refused = post(other, "small", {"n": 9})
    assert refused.status_code == 429 and int(refused.headers["Retry-After"]) >= 1
    assert post(holder, "ci", {"status": "other hook"}).status_code == 202  # the limit is per hook


def test_each_process_answers_hooks_on_its_own_port(fleet_factory) -> None:
    """Both listeners are up (two processes on one host with one config would clash on one port)."""
    fleet, holder, other = start_two(fleet_factory)
    ports = {p.env["CLAWGATE_GATEWAY__HOOKS_PORT"] for p in (holder, other)}
    assert len(ports) == 2
    for proc in (holder, other):
        assert post(proc, "ci", {"status": "ping"}).status_code == 202
    wait_until(lambda: sum(fleet_status(p)["answered"] for p in fleet.procs) == 1, "one run for one body",
               describe=fleet.logs)


def test_a_watched_mailbox_is_one_imap_login_per_fleet_and_moves_on_a_kill(fleet_factory, dovecot: Dovecot,
                                                                           fake_model: FakeAnthropic) -> None:
    """Mail push (a hook of kind imap) is a singleton: one process logs in and watches; the other does not
    touch the mailbox; SIGKILL of the watcher moves the watch, and every new mail is one run."""
    inbox = unique_address("fleet-invoices")
    dovecot.add_user(inbox, "inbox-password-7")
    imap = {"imap_host": "127.0.0.1", "imap_port": dovecot.port, "imap_tls": "none", "username": inbox,
            "password": "inbox-password-7", "idle_seconds": 5}
    table = ('\n[hooks.invoices]\nkind = "imap"\nmessage = "Mail about {{ body.subject }}"\n'
             f"imap = {{ {', '.join(f'{k} = {json.dumps(v)}' for k, v in imap.items())} }}\n")
    fleet: Fleet = fleet_factory()
    first = fleet.add(start=False)
    config = fleet.home / "config.toml"
    config.write_text(config.read_text() + table)
    first.start()
    fleet.add()
    fleet.spread(2)
    watching = "hook invoices: watching INBOX"
    watcher = wait_until(lambda: next((p for p in fleet.procs if watching in p.log_text()), None),
                         "a process watching the mailbox", describe=fleet.logs)
    other = next(p for p in fleet.procs if p is not watcher)
    wait_past(1.1)  # INTERNALDATE has whole seconds: mail appended from now on is after the first start
    dovecot.append(inbox, _mail("Invoice 1"))
    wait_until(lambda: asked(fake_model, "Mail about Invoice 1") == 1, "the first mail's run", describe=fleet.logs)
    assert imap_connections(other, dovecot.port) == 0 and watching not in other.log_text()

    watcher.kill()
    dovecot.append(inbox, _mail("Invoice 2"))  # while nobody watches: read by the next watcher
    wait_until(lambda: watching in other.log_text(), "the survivor watching the mailbox", describe=fleet.logs)
    dovecot.append(inbox, _mail("Invoice 3"))
    wait_until(lambda: asked(fake_model, "Mail about Invoice 2") and asked(fake_model, "Mail about Invoice 3"),
               "the later mails' runs", describe=fleet.logs)
    wait_past(2.0)
    assert [asked(fake_model, f"Mail about Invoice {n}") for n in (1, 2, 3)] == [1, 1, 1]


def _mail(subject: str) -> bytes:
    msg = EmailMessage()
    msg["From"] = "billing@vendor.example"
    msg["To"] = "me@example.test"
    msg["Subject"] = subject
    msg["Message-ID"] = make_msgid(domain="vendor.example")
    msg.set_content("Please pay.")
    return msg.as_bytes()
