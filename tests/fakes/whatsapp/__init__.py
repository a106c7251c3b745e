"""A fake WhatsApp Cloud API: the Graph API endpoints the channel calls and Meta's webhook sender."""

from tests.fakes.whatsapp.reading import formats_of, plain_of
from tests.fakes.whatsapp.server import APP_SECRET, PHONE_NUMBER_ID, TOKEN, VERIFY_TOKEN, FakeWhatsApp

__all__ = ["APP_SECRET", "FakeWhatsApp", "PHONE_NUMBER_ID", "TOKEN", "VERIFY_TOKEN", "formats_of", "plain_of"]
