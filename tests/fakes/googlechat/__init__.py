"""A fake Google Chat: the OAuth token endpoint, the Chat REST API, the Chat issuer's certificates and the
event sender that signs each event's bearer JWT."""

from tests.fakes.googlechat.keys import PROJECT_NUMBER
from tests.fakes.googlechat.reading import formats_of, plain_of
from tests.fakes.googlechat.server import APP_EMAIL, FakeGoogleChat, Sent, User

__all__ = ["APP_EMAIL", "PROJECT_NUMBER", "FakeGoogleChat", "Sent", "User", "formats_of", "plain_of"]
