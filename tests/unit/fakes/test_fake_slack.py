"""The fake Slack server, driven by the real slack_sdk (AsyncWebClient and the aiohttp
SocketModeClient), unmodified and with no clawgate code involved: what next week's Slack adapter
will be tested against must itself behave like Slack towards Slack's own client."""

from __future__ import annotations

import asyncio
import json
import time
from typing import AsyncIterator, Iterator

import pytest
from aiohttp import web

from slack_sdk.errors import SlackApiError
from slack_sdk.http_retry.builtin_async_handlers import AsyncRateLimitErrorRetryHandler
from slack_sdk.signature import SignatureVerifier
from slack_sdk.socket_mode.aiohttp import SocketModeClient
from slack_sdk.socket_mode.request import SocketModeRequest
from slack_sdk.socket_mode.response import SocketModeResponse
from slack_sdk.web.async_client import AsyncWebClient

from tests.fakes.slack_api import APP_TOKEN, BOT_TOKEN, SIGNING_SECRET, FakeSlack
from tests.fakes.slack_api import workspace as W

ACK_TIMEOUT = 0.5


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeSlack]:
    for var in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy"):  # the SDK reads these
        monkeypatch.delenv(var, raising=False)
    with FakeSlack(ack_timeout=ACK_TIMEOUT, disconnect_grace=2.0) as f:
        yield f


@pytest.fixture
def web_client(fake: FakeSlack) -> AsyncWebClient:
    return AsyncWebClient(token=BOT_TOKEN, base_url=fake.api_url)


class App:
    """A minimal Socket Mode app on the real SDK: records every request, acknowledges unless told."""

    def __init__(self, fake: FakeSlack) -> None:
        self.client = SocketModeClient(app_token=APP_TOKEN,
                                       web_client=AsyncWebClient(base_url=fake.api_url))
        self.requests: list[SocketModeRequest] = []
        self.arrived = asyncio.Event()
        self.ack = True
        self.ack_payload: dict | None = None
        self.skip_first_delivery = False
        self.client.socket_mode_request_listeners.append(self._on_request)

    async def _on_request(self, client: SocketModeClient, req: SocketModeRequest) -> None:
        self.requests.append(req)
        self.arrived.set()
        if not self.ack or (self.skip_first_delivery and not req.retry_attempt):
            return
        await client.send_socket_mode_response(SocketModeResponse(req.envelope_id, self.ack_payload))

    async def wait_requests(self, n: int, timeout: float = 10) -> list[SocketModeRequest]:
        async def until() -> None:
            while len(self.requests) < n:
                self.arrived.clear()
                await self.arrived.wait()
        await asyncio.wait_for(until(), timeout)
        return self.requests


@pytest.fixture
async def app(fake: FakeSlack) -> AsyncIterator[App]:
    a = App(fake)
    await a.client.connect()
    await fake.wait_for_async(lambda f: list(f.frames_out("hello")))
    yield a
    await a.client.close()


# -- Socket Mode ------------------------------------------------------------------------------

async def test_connect_receive_dm_and_mention_and_acknowledge(fake: FakeSlack, app: App) -> None:
    (hello,) = list(fake.frames_out("hello"))
    assert hello.data["connection_info"]["app_id"] == W.APP_ID
    assert [c.ok for c in fake.calls_to("apps.connections.open")] == [True]

    dm = fake.send_message("hello bot")
    mention = fake.send_mention("what's up?")
    first, second = await app.wait_requests(2)

    assert first.type == "events_api" and first.envelope_id == dm.envelope_id
    event = first.payload["event"]
    assert (event["type"], event["channel_type"], event["channel"], event["user"], event["text"]) == (
        "message", "im", W.OWNER_DM, W.OWNER_ID, "hello bot")
    assert first.retry_attempt == 0 and first.accepts_response_payload is False
    m = second.payload["event"]
    assert (m["type"], m["channel"]) == ("app_mention", W.GENERAL)
    assert m["text"] == f"<@{W.BOT_USER_ID}> what's up?"

    acked = await fake.wait_for_async(lambda f: len(f.acked()) == 2 and f.acked())
    assert {e.envelope_id for e in acked} == {dm.envelope_id, mention.envelope_id}
    assert not any(e.expired for e in acked) and not fake.unknown_acks

    fake.send_mention("twice?", also_message_event=True)  # app_mention + message for one post
    *_, a, b = await app.wait_requests(4)
    ea, eb = a.payload["event"], b.payload["event"]
    assert (ea["type"], eb["type"], eb["channel_type"]) == ("app_mention", "message", "channel")
    assert ea["ts"] == eb["ts"] and a.payload["event_id"] != b.payload["event_id"]


async def test_unacknowledged_envelope_is_redelivered_with_retry_attempt(fake: FakeSlack, app: App) -> None:
    app.skip_first_delivery = True
    env = fake.send_message("are you there?")
    first, retry = await app.wait_requests(2)

    assert first.envelope_id == env.envelope_id and first.retry_attempt == 0
    assert retry.retry_attempt == 1 and retry.retry_reason == "timeout"
    assert retry.payload["event_id"] == first.payload["event_id"]
    assert retry.envelope_id != first.envelope_id
    deliveries = await fake.wait_for_async(lambda f: (e := f.envelopes_for(env.event_id)) and e[-1].acked and e)
    assert [(d.retry_attempt, d.acked, d.expired) for d in deliveries] == [(0, False, True), (1, True, False)]
    assert deliveries[1].sent_at - deliveries[0].sent_at >= ACK_TIMEOUT


async def test_interactive_and_slash_envelopes_are_not_retried(fake: FakeSlack, app: App) -> None:
    app.ack = False
    env = fake.slash_command("/clawgate", "status")
    await fake.wait_for_async(lambda f: env.expired)
    assert len(fake.envelopes) == 1 and len(app.requests) == 1


@pytest.mark.parametrize("reason", ["refresh_requested", "warning"])
async def test_disconnect_frame_then_reconnect_loses_no_event(fake: FakeSlack, app: App, reason: str) -> None:
    before = fake.send_message("before the refresh")
    await app.wait_requests(1)
    (old,) = fake.disconnect(reason)
    during = [fake.send_message(f"during {i}") for i in range(3)]
    await app.wait_requests(4)
    await fake.wait_for_async(lambda f: len(f.acked()) == 4)

    assert [f.data["reason"] for f in fake.frames_out("disconnect")] == [reason]
    assert [c.ok for c in fake.calls_to("apps.connections.open")] == [True, True]
    assert len(list(fake.frames_out("hello"))) == 2
    got = [r.payload["event"]["text"] for r in app.requests]
    assert got == ["before the refresh", "during 0", "during 1", "during 2"]  # each once, in order
    assert before.connection == old
    assert all(e.connection not in (None, old) and e.acked for e in during)


async def test_socket_url_is_good_for_one_connection(fake: FakeSlack, web_client: AsyncWebClient) -> None:
    app_web = AsyncWebClient(token=APP_TOKEN, base_url=fake.api_url)
    url = (await app_web.apps_connections_open(app_token=APP_TOKEN))["url"]
    import aiohttp
    async with aiohttp.ClientSession() as s:
        async with s.ws_connect(url) as ws:
            hello = json.loads((await ws.receive()).data)
            assert hello["type"] == "hello"
        with pytest.raises(aiohttp.WSServerHandshakeError) as info:
            await s.ws_connect(url)
        assert info.value.status == 401


async def test_block_actions_button_press(fake: FakeSlack, app: App, web_client: AsyncWebClient) -> None:
    blocks = [{"type": "section", "text": {"type": "mrkdwn", "text": "Run `rm -rf build`?"}},
              {"type": "actions", "block_id": "approval", "elements": [
                  {"type": "button", "action_id": "approve", "value": "task-7", "style": "primary",
                   "text": {"type": "plain_text", "text": "Approve"}},
                  {"type": "button", "action_id": "deny", "value": "task-7", "style": "danger",
                   "text": {"type": "plain_text", "text": "Deny"}}]}]
    posted = await web_client.chat_postMessage(channel=W.OWNER_DM, text="Approve?", blocks=blocks)
    env = fake.press_button(posted["ts"], "approve")
    (req,) = await app.wait_requests(1)

    assert req.type == "interactive" and req.envelope_id == env.envelope_id
    p = req.payload
    assert p["type"] == "block_actions" and p["user"]["id"] == W.OWNER_ID
    assert p["container"]["message_ts"] == posted["ts"] and p["channel"]["id"] == W.OWNER_DM
    assert [(a["action_id"], a["value"], a["block_id"]) for a in p["actions"]] == [("approve", "task-7", "approval")]
    await fake.wait_for_async(lambda f: env.acked)

    import aiohttp
    async with aiohttp.ClientSession() as s:
        async with s.post(p["response_url"], json={"replace_original": True, "text": "Approved"}) as r:
            assert r.status == 200
    assert fake.responses[-1][1]["text"] == "Approved"
    with pytest.raises(KeyError):
        fake.press_button("1.000000", "approve")


async def test_slash_command_ack_carries_response_payload(fake: FakeSlack, app: App) -> None:
    app.ack_payload = {"text": "3 tasks running"}
    env = fake.slash_command("/clawgate", "status")
    (req,) = await app.wait_requests(1)
    assert req.type == "slash_commands" and req.accepts_response_payload is True
    assert (req.payload["command"], req.payload["text"], req.payload["user_id"]) == ("/clawgate", "status", W.OWNER_ID)
    await fake.wait_for_async(lambda f: env.acked)
    assert env.ack_payload == {"text": "3 tasks running"}


# -- Web API ----------------------------------------------------------------------------------

async def test_threaded_reply_with_blocks_update_and_reaction(fake: FakeSlack, app: App,
                                                              web_client: AsyncWebClient) -> None:
    fake.send_message("deploy please")
    (req,) = await app.wait_requests(1)
    ev = req.payload["event"]
    blocks = [{"type": "header", "text": {"type": "plain_text", "text": "Deploy"}},
              {"type": "section", "text": {"type": "mrkdwn", "text": "*Step 1* of 2: _building_"}}]
    resp = await web_client.chat_postMessage(channel=ev["channel"], thread_ts=ev["ts"], text="Step 1 of 2",
                                             blocks=blocks, mrkdwn=True)
    assert resp["ok"] and resp["message"]["thread_ts"] == ev["ts"]
    (msg,) = fake.posted(W.OWNER_DM)
    assert (msg["thread_ts"], msg["blocks"], msg["text"], msg["mrkdwn"]) == (ev["ts"], blocks, "Step 1 of 2", True)
    assert fake.calls_to("chat.postMessage")[0].params["blocks"] == blocks  # sent as JSON, as the SDK does

    await web_client.chat_update(channel=W.OWNER_DM, ts=resp["ts"], text="Step 2 of 2")
    await web_client.reactions_add(channel=W.OWNER_DM, timestamp=ev["ts"], name="eyes")
    assert fake.posted(W.OWNER_DM)[0]["text"] == "Step 2 of 2"
    with pytest.raises(SlackApiError) as e:
        await web_client.reactions_add(channel=W.OWNER_DM, timestamp=ev["ts"], name="eyes")
    assert e.value.response["error"] == "already_reacted"
    with pytest.raises(SlackApiError) as e:
        await web_client.chat_update(channel=W.OWNER_DM, ts=ev["ts"], text="not mine")
    assert e.value.response["error"] == "cant_update_message"


async def test_identity_lookups_and_auth_errors(fake: FakeSlack, web_client: AsyncWebClient) -> None:
    me = await web_client.auth_test()
    assert (me["user_id"], me["bot_id"], me["team_id"]) == (W.BOT_USER_ID, W.BOT_ID, W.TEAM_ID)
    assert (await web_client.conversations_info(channel=W.OWNER_DM))["channel"]["is_im"] is True
    assert (await web_client.users_info(user=W.OWNER_ID))["user"]["real_name"] == "Owner Person"

    async def error_of(coro) -> tuple[str, int]:
        with pytest.raises(SlackApiError) as e:
            await coro
        return e.value.response["error"], e.value.response.status_code

    wrong = AsyncWebClient(token="xoxb-wrong", base_url=fake.api_url)
    app_tok = AsyncWebClient(token=APP_TOKEN, base_url=fake.api_url)
    assert await error_of(wrong.auth_test()) == ("invalid_auth", 200)
    assert await error_of(AsyncWebClient(base_url=fake.api_url).auth_test()) == ("not_authed", 200)
    assert await error_of(web_client.apps_connections_open(app_token=BOT_TOKEN)) == ("not_allowed_token_type", 200)
    assert await error_of(app_tok.chat_postMessage(channel=W.OWNER_DM, text="x")) == ("not_allowed_token_type", 200)
    assert await error_of(web_client.chat_postMessage(channel="C0NOPE", text="x")) == ("channel_not_found", 200)
    assert await error_of(web_client.users_info(user="U0NOPE")) == ("user_not_found", 200)
    assert fake.posted() == []


async def test_message_limits_refused_as_slack_refuses_them(fake: FakeSlack, web_client: AsyncWebClient) -> None:
    async def error_of(**kw) -> str:
        with pytest.raises(SlackApiError) as e:
            await web_client.chat_postMessage(channel=W.OWNER_DM, **kw)
        return e.value.response["error"]

    def section(n: int) -> dict:
        return {"type": "section", "text": {"type": "mrkdwn", "text": "x" * n}}

    assert await error_of(text="y" * 4001) == "msg_too_long"
    assert await error_of(text="y" * 40_001) == "msg_too_long"
    with pytest.warns(UserWarning):  # the SDK's own warning about a missing text
        assert await error_of(text="") == "no_text"
    assert await error_of(text="t", blocks=[section(3001)]) == "invalid_blocks"
    assert await error_of(text="t", blocks=[section(10)] * 51) == "invalid_blocks"
    assert await error_of(text="t", blocks=[section(2900)] * 5) == "msg_blocks_too_long"
    with pytest.raises(SlackApiError) as e:
        await web_client.chat_postMessage(channel=W.OWNER_DM, text="t", blocks=[section(3001)])
    assert e.value.response["errors"] == ["must be less than 3001 characters [json-pointer:/blocks/0/text/text]"]
    assert fake.posted() == []

    await web_client.chat_postMessage(channel=W.OWNER_DM, text="y" * 4000)
    await web_client.chat_postMessage(channel=W.OWNER_DM, text="t", blocks=[section(3000)] + [section(10)] * 49)
    assert len(fake.posted(W.OWNER_DM)) == 2


async def test_rate_limit_429_with_retry_after_is_honoured_by_the_sdk(fake: FakeSlack) -> None:
    plain = AsyncWebClient(token=BOT_TOKEN, base_url=fake.api_url)
    fake.rate_limit("chat.postMessage", retry_after=2)
    with pytest.raises(SlackApiError) as e:
        await plain.chat_postMessage(channel=W.OWNER_DM, text="hi")
    assert e.value.response.status_code == 429 and e.value.response["error"] == "ratelimited"
    assert e.value.response.headers["Retry-After"] == "2"

    retrying = AsyncWebClient(token=BOT_TOKEN, base_url=fake.api_url,
                              retry_handlers=[AsyncRateLimitErrorRetryHandler(max_retry_count=1)])
    fake.rate_limit("chat.postMessage", retry_after=2)
    t0 = time.monotonic()
    resp = await retrying.chat_postMessage(channel=W.OWNER_DM, text="hi again")
    assert resp["ok"] and time.monotonic() - t0 >= 2
    statuses = [(c.status, c.at) for c in fake.calls_to("chat.postMessage")]
    assert [s for s, _ in statuses] == [429, 429, 200]
    assert statuses[2][1] - statuses[1][1] >= 2  # waited Retry-After before the retry
    assert [m["text"] for m in fake.posted()] == ["hi again"]


async def test_file_upload_v2_flow(fake: FakeSlack, app: App, web_client: AsyncWebClient) -> None:
    fake.send_message("send me the report")
    (req,) = await app.wait_requests(1)
    ts = req.payload["event"]["ts"]
    resp = await web_client.files_upload_v2(channel=W.OWNER_DM, content="total: 42\n", filename="report.txt",
                                            title="Report", initial_comment="here it is", thread_ts=ts)
    assert resp["file"]["id"] == fake.uploads[0][0] and resp["file"]["title"] == "Report"
    assert fake.uploads[0][1] == b"total: 42\n"
    assert [c.method for c in fake.calls] == [
        "apps.connections.open", "files.getUploadURLExternal", "files.completeUploadExternal"]
    assert fake.calls_to("files.getUploadURLExternal")[0].params["length"] == "10"
    share = [m for m in fake.workspace.messages if m.get("upload")]
    assert [(m["text"], m["thread_ts"], m["files"]) for m in share] == [("here it is", ts, [resp["file"]["id"]])]

    with pytest.raises(SlackApiError) as e:  # completing a file that was never uploaded
        url = await web_client.files_getUploadURLExternal(filename="x.txt", length=3)
        await web_client.files_completeUploadExternal(files=[{"id": url["file_id"]}], channel_id=W.OWNER_DM)
    assert e.value.response["error"] == "file_not_found"


# -- Events API over HTTP ---------------------------------------------------------------------

async def test_signed_events_api_request_verifies_and_tampered_does_not(fake: FakeSlack) -> None:
    verifier = SignatureVerifier(signing_secret=SIGNING_SECRET)
    seen: list[dict] = []

    async def endpoint(request: web.Request) -> web.Response:
        body = await request.text()
        if not verifier.is_valid_request(body, dict(request.headers)):
            return web.Response(status=401)
        seen.append(json.loads(body))
        return web.Response(status=200)

    http_app = web.Application()
    http_app.router.add_post("/slack/events", endpoint)
    runner = web.AppRunner(http_app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    url = f"http://127.0.0.1:{site._server.sockets[0].getsockname()[1]}/slack/events"
    try:
        body = fake.event_body({"type": "app_mention", "user": W.OWNER_ID, "channel": W.GENERAL,
                                "text": f"<@{W.BOT_USER_ID}> hi", "ts": "1.000001", "event_ts": "1.000001"})
        assert await fake.post_signed(url, body) == (200, "")
        assert await fake.post_signed(url, body, tamper=True) == (401, "")
        assert await fake.post_signed(url, body, secret="not-the-secret") == (401, "")
        assert await fake.post_signed(url, body, timestamp=int(time.time()) - 600) == (401, "")  # replayed
        assert [e["event"]["type"] for e in seen] == ["app_mention"]
        assert await fake.post_signed(url, fake.url_verification_body("c-123")) == (200, "")
        assert seen[-1] == {"token": "fake-verification-token", "challenge": "c-123", "type": "url_verification"}
        headers = fake.signed_request(body)
        assert verifier.is_valid(body, headers["X-Slack-Request-Timestamp"], headers["X-Slack-Signature"])
    finally:
        await runner.cleanup()


async def test_envelope_left_unacknowledged_by_a_dead_app_reaches_the_next_connection(fake: FakeSlack) -> None:
    """An app killed between receiving an event and acknowledging it gets the event again (as a
    retry) once it is back, on its new connection."""
    first = App(fake)
    first.ack = False
    await first.client.connect()
    env = fake.send_message("remember this")
    await first.wait_requests(1)
    await first.client.close()  # gone without acknowledging

    second = App(fake)
    await second.client.connect()
    try:
        (req,) = await second.wait_requests(1)
        assert req.payload["event_id"] == env.event_id and req.retry_attempt == 1
        deliveries = await fake.wait_for_async(lambda f: (e := f.envelopes_for(env.event_id))[-1].acked and e)
        assert deliveries[0].connection != deliveries[-1].connection
    finally:
        await second.client.close()


async def test_injected_failures_are_answered_as_slack_would(fake: FakeSlack, web_client: AsyncWebClient) -> None:
    fake.fail("chat.postMessage", "channel_not_found")
    fake.fail("chat.postMessage", "internal_error", status=500)
    with pytest.raises(SlackApiError) as e:
        await web_client.chat_postMessage(channel=W.OWNER_DM, text="a")
    assert (e.value.response.status_code, e.value.response["error"]) == (200, "channel_not_found")
    with pytest.raises(SlackApiError) as e:
        await web_client.chat_postMessage(channel=W.OWNER_DM, text="b")
    assert e.value.response.status_code == 500
    await web_client.chat_postMessage(channel=W.OWNER_DM, text="c")
    assert [m["text"] for m in fake.posted()] == ["c"]


def test_sync_use_from_a_test_thread(fake: FakeSlack) -> None:
    """A sync test (a daemon in a subprocess) uses the same fake: plain HTTP in, wait_for out."""
    import urllib.request
    req = urllib.request.Request(fake.api_url + "chat.postMessage", method="POST",
                                 data=json.dumps({"channel": W.OWNER_DM, "text": "from a thread"}).encode(),
                                 headers={"Authorization": f"Bearer {BOT_TOKEN}",
                                          "Content-Type": "application/json; charset=utf-8"})
    with urllib.request.urlopen(req, timeout=10) as resp:
        assert json.loads(resp.read())["ok"] is True
    (msg,) = fake.wait_for(lambda f: f.posted(W.OWNER_DM))
    assert msg["text"] == "from a thread"
    with pytest.raises(TimeoutError):
        fake.wait_for(lambda f: len(f.posted()) > 1, timeout=0.2)


async def test_shared_file_info_and_private_download_need_the_bot_token(fake: FakeSlack, app: App,
                                                                         web_client: AsyncWebClient) -> None:
    fake.send_file("notes.txt", b"line one\n", text="read this")
    fake.send_file("hidden.txt", b"secret\n", full_file=False)
    first, second = await app.wait_requests(2)
    event = first.payload["event"]
    assert (event["subtype"], event["text"]) == ("file_share", "read this")
    (f,) = event["files"]
    assert (f["name"], f["size"], f["mimetype"]) == ("notes.txt", 9, "text/plain")
    (bare,) = second.payload["event"]["files"]
    assert set(bare) == {"id"}
    info = await web_client.files_info(file=bare["id"])
    assert info["file"]["name"] == "hidden.txt" and info["file"]["url_private_download"]

    import aiohttp
    async with aiohttp.ClientSession() as session:
        async with session.get(f["url_private_download"], headers={"Authorization": f"Bearer {BOT_TOKEN}"}) as r:
            assert (r.status, await r.read()) == (200, b"line one\n")
        async with session.get(f["url_private"]) as r:  # no token: the sign-in page, not the file
            assert r.content_type == "text/html" and b"line one" not in await r.read()
    assert [auth for _, auth in fake.file_fetches] == [f"Bearer {BOT_TOKEN}", ""]
    with pytest.raises(SlackApiError) as e:
        await web_client.files_info(file="F0NOSUCH")
    assert e.value.response["error"] == "file_not_found"


async def test_chat_delete_removes_only_the_bots_own_message(fake: FakeSlack, web_client: AsyncWebClient) -> None:
    posted = await web_client.chat_postMessage(channel=W.OWNER_DM, text="working…")
    await web_client.chat_delete(channel=W.OWNER_DM, ts=posted["ts"])
    assert fake.posted(W.OWNER_DM) == [] and [m["text"] for m in fake.workspace.deleted] == ["working…"]
    with pytest.raises(SlackApiError) as e:
        await web_client.chat_delete(channel=W.OWNER_DM, ts=posted["ts"])
    assert e.value.response["error"] == "message_not_found"


async def test_a_lost_acknowledgement_gets_the_event_sent_again(fake: FakeSlack, app: App) -> None:
    fake.socket.lose_acks(1)
    env = fake.send_message("once please")
    first, retry = await app.wait_requests(2)
    assert (first.retry_attempt, retry.retry_attempt) == (0, 1)
    deliveries = await fake.wait_for_async(lambda f: (e := f.envelopes_for(env.event_id)) and e[-1].acked and e)
    assert [d.acked for d in deliveries] == [False, True] and len(fake.socket.lost_acks) == 1
