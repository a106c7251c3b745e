"""A fake Telegram Bot API server for tests, split by job.

Why a package: one module per concern (HTML checks, update building, parameter checks,
Bot API methods, failure injection, observation, HTTP serving) keeps each small enough
to read in one sitting. ``tests.fakes.telegram_api`` re-exports everything for existing
imports.
"""

from tests.fakes.telegram.html import HtmlParseError, html_to_plain_length
from tests.fakes.telegram.params import MAX_MESSAGE_LENGTH
from tests.fakes.telegram.server import FakeTelegram

__all__ = ["FakeTelegram", "HtmlParseError", "html_to_plain_length", "MAX_MESSAGE_LENGTH"]
