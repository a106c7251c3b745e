"""Tests of the fake Telegram Bot API, driven by the real python-telegram-bot client.

Why: every daemon test that talks "Telegram" trusts this fake, so it must speak PTB's actual
wire format and reproduce the Bot API errors the daemon has to survive.
"""

from __future__ import annotations

import asyncio
import json
import urllib.request
from collections.abc import AsyncIterator, Iterator

import pytest
from telegram import Bot, InlineKeyboardButton, InlineKeyboardMarkup, Update
from telegram.error import BadRequest, ChatMigrated, RetryAfter
from telegram.ext import Application, CallbackQueryHandler, ContextTypes, MessageHandler, filters

from tests.fakes.telegram_api import FakeTelegram, html_to_plain_length

CHAT = 4242


@pytest.fixture
def fake() -> Iterator[FakeTelegram]:
    """A started fake per test so recorded traffic never leaks between tests."""
    with FakeTelegram() as server:
        yield server


@pytest.fixture
async def bot(fake: FakeTelegram) -> AsyncIterator[Bot]:
    """A real PTB Bot pointed at the fake."""
    async with Bot(fake.token, base_url=fake.base_url) as client:
        yield client


def _build_app(fake: FakeTelegram) -> Application:
    return Application.builder().token(fake.token).base_url(fake.base_url).build()


async def _start_polling(app: Application) -> None:
    await app.updater.start_polling(poll_interval=0, timeout=1)
    await app.start()


async def _stop_polling(app: Application) -> None:
    await app.updater.stop()
    await app.stop()


async def test_get_me(bot: Bot, fake: FakeTelegram) -> None:
    me = await bot.get_me()
    assert me.is_bot and me.username == fake.bot_username
    assert me.id == 123456
    assert fake.calls[0][0] == "getMe"


async def test_send_message_recorded(bot: Bot, fake: FakeTelegram) -> None:
    first = await bot.send_message(CHAT, "hello <b>world</b> &amp; co", parse_mode="HTML")
    second = await bot.send_message(CHAT, "again")
    assert first.text == "hello world & co"
    assert second.message_id == first.message_id + 1
    assert first.chat.id == CHAT and first.from_user.is_bot
    assert fake.messages_to(CHAT) == ["hello <b>world</b> &amp; co", "again"]
    assert fake.sent[0]["parse_mode"] == "HTML"
    assert fake.sent[0]["message_id"] == first.message_id


async def test_html_unsupported_tag_rejected(bot: Bot, fake: FakeTelegram) -> None:
    with pytest.raises(BadRequest, match="(?i)can't parse entities") as info:
        await bot.send_message(CHAT, "x <foo>bar</foo>", parse_mode="HTML")
    # PTB strips "Bad Request: " and capitalises; the rest is Telegram's wording.
    assert 'unsupported start tag "foo" at byte offset 2' in str(info.value)
    assert fake.sent == []
    assert fake.calls[-1][0] == "sendMessage"  # rejected calls are still visible


@pytest.mark.parametrize(
    "html",
    ["<b>unclosed", "<b><i>x</b></i>", "a < b", "fish & chips", "</b>", '<span class="x">s</span>'],
)
async def test_html_malformed_rejected(bot: Bot, html: str) -> None:
    with pytest.raises(BadRequest, match="(?i)can't parse entities"):
        await bot.send_message(CHAT, html, parse_mode="HTML")


def test_html_plain_length_counts_rendered_text() -> None:
    html = '<pre><code class="language-py">x&lt;1</code></pre><a href="https://e.x/?a=1&amp;b=2">l</a>'
    assert html_to_plain_length(html) == len("x<1") + 1
    assert html_to_plain_length("<blockquote expandable>q</blockquote><tg-spoiler>s</tg-spoiler>") == 2


async def test_too_long_and_empty_rejected(bot: Bot, fake: FakeTelegram) -> None:
    with pytest.raises(BadRequest, match="(?i)too long"):
        await bot.send_message(CHAT, "x" * 5000)
    # 4096 visible characters are fine even though the markup makes the source longer.
    await bot.send_message(CHAT, "<b>" + "y" * 4096 + "</b>", parse_mode="HTML")
    with pytest.raises(BadRequest, match="(?i)text is empty"):
        await bot.send_message(CHAT, "<b> </b>", parse_mode="HTML")
    assert len(fake.sent) == 1


@pytest.mark.filterwarnings("ignore::telegram.warnings.PTBDeprecationWarning")
async def test_fail_next_429(bot: Bot, fake: FakeTelegram) -> None:
    fake.fail_next("sendMessage", retry_after=3)
    with pytest.raises(RetryAfter) as info:
        await bot.send_message(CHAT, "throttled")
    retry_after = info.value.retry_after  # int today, timedelta with PTB_TIMEDELTA=1
    assert getattr(retry_after, "total_seconds", lambda: retry_after)() == 3
    assert fake.sent == []
    await bot.send_message(CHAT, "ok now")
    assert fake.messages_to(CHAT) == ["ok now"]


async def test_edit_and_chat_action_and_commands(bot: Bot, fake: FakeTelegram) -> None:
    msg = await bot.send_message(CHAT, "draft")
    await bot.edit_message_text("final", chat_id=CHAT, message_id=msg.message_id)
    with pytest.raises(BadRequest, match="(?i)message is not modified"):
        await bot.edit_message_text("final", chat_id=CHAT, message_id=msg.message_id)
    await bot.send_chat_action(CHAT, "typing")
    await bot.set_my_commands([("new", "Start a new task"), ("status", "Show status")])
    commands = await bot.get_my_commands()
    assert [c.command for c in commands] == ["new", "status"]
    assert [e["text"] for e in fake.edits] == ["final"]
    assert fake.actions[0]["action"] == "typing"
    assert fake.commands[-1]["commands"][0] == {"command": "new", "description": "Start a new task"}
    assert await bot.delete_message(CHAT, msg.message_id)


def test_raw_http_errors(fake: FakeTelegram) -> None:
    """Wrong token -> 401, unknown method -> 404, JSON bodies accepted."""

    def call(path: str, body: dict[str, object] | None = None) -> tuple[int, dict[str, object]]:
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(
            f"http://127.0.0.1:{fake.port}{path}", data=data, headers={"Content-Type": "application/json"}
        )
        try:
            with urllib.request.urlopen(req, timeout=5) as resp:
                return resp.status, json.loads(resp.read())
        except urllib.error.HTTPError as err:
            return err.code, json.loads(err.read())

    assert call("/bot1:WRONG/getMe")[0] == 401
    status, payload = call(f"/bot{fake.token}/noSuchMethod")
    assert status == 404 and payload["ok"] is False
    status, payload = call(f"/bot{fake.token}/sendMessage", {"chat_id": 7, "text": "via json"})
    assert status == 200 and payload["result"]["text"] == "via json"
    assert fake.messages_to(7) == ["via json"]


async def test_long_polling_offset_and_redelivery(fake: FakeTelegram) -> None:
    app = _build_app(fake)
    seen: list[tuple[int, str]] = []

    async def on_text(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        seen.append((update.update_id, update.message.text))
        await update.message.reply_text(f"echo: {update.message.text}", do_quote=True)

    app.add_handler(MessageHandler(filters.TEXT, on_text))
    async with app:
        await _start_polling(app)
        try:
            # Sent while the poll is already blocking: must be returned without waiting it out.
            await asyncio.sleep(0.2)
            uid = fake.inject_message(CHAT, "/start hi", username="alice")
            await fake.wait_sent_async(CHAT, 1, timeout=3)
            assert seen == [(uid, "/start hi")]
            await fake.wait_for_async(lambda: fake.confirmed_offset == uid + 1, timeout=3)
            assert fake.pending_updates() == 0

            fake.redeliver(uid)
            await fake.wait_for_async(lambda: len(seen) == 2, timeout=3)
            assert seen[1] == (uid, "/start hi")
            await fake.wait_for_async(lambda: fake.pending_updates() == 0, timeout=3)
        finally:
            await _stop_polling(app)
    assert fake.messages_to(CHAT) == ["echo: /start hi", "echo: /start hi"]
    # do_quote sends reply_parameters; the fake resolves it to the injected message.
    assert fake.sent[0]["reply_to_message_id"] == 1
    assert fake.sent[1]["message_id"] == 3  # user and bot messages share the chat's id sequence


async def test_group_message_entities(fake: FakeTelegram) -> None:
    app = _build_app(fake)
    entity_types: list[list[str]] = []

    async def on_any(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        entity_types.append([e.type for e in update.message.entities])

    app.add_handler(MessageHandler(filters.ALL, on_any))
    async with app:
        await _start_polling(app)
        try:
            fake.inject_message(-100555, f"/ask@{fake.bot_username} hey @{fake.bot_username}",
                                user_id=9, chat_type="supergroup")
            await fake.wait_for_async(lambda: len(entity_types) == 1, timeout=3)
        finally:
            await _stop_polling(app)
    assert entity_types == [["bot_command", "mention"]]


async def test_callback_query_and_inline_keyboard(fake: FakeTelegram) -> None:
    app = _build_app(fake)
    pressed: list[str] = []

    async def on_button(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        query = update.callback_query
        pressed.append(query.data)
        assert query.message is not None and query.message.text == "Approve?"
        await query.answer("done")
        await query.edit_message_reply_markup(None)

    app.add_handler(CallbackQueryHandler(on_button))
    async with app:
        await _start_polling(app)
        try:
            keyboard = InlineKeyboardMarkup([[InlineKeyboardButton("Yes", callback_data="approve:1")]])
            msg = await app.bot.send_message(CHAT, "Approve?", reply_markup=keyboard)
            assert fake.sent[-1]["reply_markup"] == {
                "inline_keyboard": [[{"text": "Yes", "callback_data": "approve:1"}]]
            }
            with pytest.raises(BadRequest, match="(?i)button_data_invalid"):
                bad = InlineKeyboardMarkup([[InlineKeyboardButton("x", callback_data="d" * 65)]])
                await app.bot.send_message(CHAT, "bad", reply_markup=bad)
            fake.inject_callback(CHAT, CHAT, "approve:1", msg.message_id)
            await fake.wait_for_async(lambda: len(fake.markup_edits) == 1, timeout=3)
        finally:
            await _stop_polling(app)
    assert pressed == ["approve:1"]
    assert fake.callback_answers[0]["text"] == "done"
    assert fake.markup_edits[0]["reply_markup"] is None


async def test_wait_for_reports_calls(fake: FakeTelegram, bot: Bot) -> None:
    await bot.get_me()
    with pytest.raises(AssertionError, match="getMe"):
        fake.wait_for(lambda: False, timeout=0.1)


async def test_a_migrated_group_answers_like_telegram(bot: Bot, fake: FakeTelegram) -> None:
    """400 with parameters.migrate_to_chat_id (PTB: ChatMigrated), and the two service messages."""
    fake.inject_message(-4242, "hi all", user_id=700, chat_type="group")
    fake.migrate_group(-4242, -1004242, user_id=700)
    with pytest.raises(ChatMigrated) as raised:
        await bot.send_message(-4242, "still there?")
    assert raised.value.new_chat_id == -1004242
    sent = await bot.send_message(-1004242, "here now")
    assert sent.chat.id == -1004242 and sent.chat.type == "supergroup"
    updates = await bot.get_updates(timeout=0)
    service = [u.message for u in updates if u.message and u.message.text is None]
    assert [(m.chat.id, m.migrate_to_chat_id, m.migrate_from_chat_id) for m in service] == [
        (-4242, -1004242, None), (-1004242, None, -4242)]
