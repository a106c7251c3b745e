"""A fake Feishu / Lark Open Platform (token, message API, long-connection event stream) for the tests."""

from tests.fakes.feishu.server import APP_ID, APP_SECRET, BOT_NAME, FakeFeishu, Message, User

__all__ = ["APP_ID", "APP_SECRET", "BOT_NAME", "FakeFeishu", "Message", "User"]
