"""A fake Slack server for tests (implementation in tests.fakes.slack)."""

from tests.fakes.slack import workspace
from tests.fakes.slack.limits import MAX_BLOCKS, MAX_SECTION_TEXT, MAX_TEXT_CHARS
from tests.fakes.slack.records import ApiCall, Envelope, Frame
from tests.fakes.slack.server import APP_TOKEN, BOT_TOKEN, SIGNING_SECRET, FakeSlack
from tests.fakes.slack.signing import sign

__all__ = ["FakeSlack", "ApiCall", "Envelope", "Frame", "BOT_TOKEN", "APP_TOKEN", "SIGNING_SECRET",
           "MAX_TEXT_CHARS", "MAX_BLOCKS", "MAX_SECTION_TEXT", "sign", "workspace"]
